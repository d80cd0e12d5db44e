package storetest

import (
	"fmt"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// testProducers checks that producer states are written with their batch,
// and only with it: a failed batch leaves them as they were, a reopened
// store has them, and a deleted thread takes them along.
func testProducers(t *testing.T, s *suite) {
	dir := t.TempDir()
	st := s.open(t, dir)
	_, err := st.Producer(ctx, "t", "p")
	wantErr(t, "producer of an unknown thread", err, store.ErrNotFound)

	b := createBatch(t, "t", 1)
	b.Producers = []store.Producer{{Key: "run-1/w1", Epoch: 0, Seq: 0}}
	commit(t, st, b)
	b = appendBatch(t, "t", 1, 2, "second")
	b.Producers = []store.Producer{{Key: "run-1/w1", Epoch: 0, Seq: 1}, {Key: "run-1/w2", Epoch: 3, Seq: 7}}
	commit(t, st, b)
	want := map[string]store.Producer{"run-1/w1": {Key: "run-1/w1", Epoch: 0, Seq: 1}, "run-1/w2": {Key: "run-1/w2", Epoch: 3, Seq: 7}}
	check := func(st store.Store, what string) {
		t.Helper()
		for key, w := range want {
			got, err := st.Producer(ctx, "t", key)
			if err != nil {
				t.Fatalf("%s: producer %s: %v", what, key, err)
			}
			if *got != w {
				t.Fatalf("%s: producer %s is %+v, want %+v", what, key, *got, w)
			}
		}
		_, err := st.Producer(ctx, "t", "run-1/nobody")
		wantErr(t, what+": unknown producer", err, store.ErrNotFound)
	}
	check(st, "after two batches")

	// A batch that fails its precondition writes no producer state.
	bad := appendBatch(t, "t", 0, 1, "stale")
	bad.Producers = []store.Producer{{Key: "run-1/w1", Epoch: 0, Seq: 2}}
	_, err = st.Commit(ctx, bad)
	wantErr(t, "a batch with a stale version", err, store.ErrConflict)
	bad = appendBatch(t, "t", 3, 1, "taken key")
	bad.Runs = []*store.RunRecord{newRun("r1", "t", tether.RunPending, "k"), newRun("r2", "t", tether.RunPending, "k")}
	bad.Producers = []store.Producer{{Key: "run-1/w1", Epoch: 0, Seq: 2}}
	_, err = st.Commit(ctx, bad)
	wantErr(t, "a batch with a taken idempotency key", err, store.ErrExists)
	check(st, "after failed batches")

	// Producers that take turns on one thread each keep their newest
	// state: also where a batch moves several, one of them twice, or moves
	// one without events.
	turns := []struct {
		events    int
		producers []store.Producer
	}{
		{1, []store.Producer{{Key: "run-1/w1", Epoch: 0, Seq: 2}}},
		{1, []store.Producer{{Key: "run-1/w2", Epoch: 3, Seq: 8}}},
		{2, []store.Producer{{Key: "run-1/w1", Epoch: 0, Seq: 3}, {Key: "run-1/w2", Epoch: 3, Seq: 9}, {Key: "run-1/w1", Epoch: 1, Seq: 0}}},
		{1, []store.Producer{{Key: "run-1/w3", Epoch: 0, Seq: 0}}},
		{0, []store.Producer{{Key: "run-1/w2", Epoch: 3, Seq: 10}}},
		{1, nil},
		{1, []store.Producer{{Key: "run-1/w2", Epoch: 3, Seq: 11}}},
		{1, manyStates("run-1/w4", 32)},
	}
	version := int64(3)
	for i, turn := range turns {
		b := appendBatch(t, "t", version, turn.events, fmt.Sprintf("turn %d", i))
		b.Producers = turn.producers
		version = commit(t, st, b).Version
		for _, p := range turn.producers {
			want[p.Key] = p
		}
		check(st, fmt.Sprintf("after turn %d", i))
	}

	// The same producer key on another thread is another producer.
	o := createBatch(t, "u", 0)
	o.Producers = []store.Producer{{Key: "run-1/w1", Epoch: 9, Seq: 9}}
	commit(t, st, o)
	check(st, "after another thread's producer")

	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = s.open(t, dir)
	check(st, "after reopening")

	if err := st.DeleteThread(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	_, err = st.Producer(ctx, "t", "run-1/w1")
	wantErr(t, "producer of a deleted thread", err, store.ErrNotFound)
	if p, err := st.Producer(ctx, "u", "run-1/w1"); err != nil || p.Epoch != 9 {
		t.Fatalf("another thread's producer after the delete: %+v, %v", p, err)
	}

	// Created again with the same id, the thread has none of the
	// producers it had (neither the one its row held nor the others),
	// and its new ones are its own.
	b = createBatch(t, "t", 1)
	b.Producers = []store.Producer{{Key: "run-1/w3", Epoch: 0, Seq: 0}}
	commit(t, st, b)
	for _, key := range []string{"run-1/w1", "run-1/w2"} {
		_, err = st.Producer(ctx, "t", key)
		wantErr(t, "producer "+key+" of the thread created again", err, store.ErrNotFound)
	}
	if p, err := st.Producer(ctx, "t", "run-1/w3"); err != nil || *p != (store.Producer{Key: "run-1/w3"}) {
		t.Fatalf("the new producer of the thread created again: %+v, %v", p, err)
	}
}

// manyStates is n states of one producer in turn, as a batch holds them
// when n appends of that producer are gathered in one commit.
func manyStates(key string, n int) []store.Producer {
	ps := make([]store.Producer, n)
	for i := range ps {
		ps[i] = store.Producer{Key: key, Epoch: 2, Seq: int64(i)}
	}
	return ps
}
