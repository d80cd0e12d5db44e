package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// snapshot is everything a store holds about some threads, to compare
// across a reopen.
type snapshot struct {
	threads map[string]*store.ThreadRecord
	logs    map[string][]*tether.Record
	runs    map[string]*store.RunRecord
	active  []string
	ckpt    map[string]string
	listing []tether.Thread
}

func takeSnapshot(tb testing.TB, st store.Store, threadIDs, runs []string) *snapshot {
	tb.Helper()
	sn := &snapshot{threads: map[string]*store.ThreadRecord{}, logs: map[string][]*tether.Record{},
		runs: map[string]*store.RunRecord{}, ckpt: map[string]string{}}
	for _, id := range threadIDs {
		sn.threads[id] = threadOf(tb, st, id)
		sn.logs[id] = readAll(tb, st, id)
		if off, data, err := st.Checkpoint(ctx, id); err == nil {
			sn.ckpt[id] = string(off) + "|" + string(data)
		}
	}
	for _, id := range runs {
		r, err := st.Run(ctx, id)
		if err != nil {
			tb.Fatal(err)
		}
		sn.runs[id] = r
	}
	sn.active = runIDs(activeRuns(tb, st))
	page, err := st.Threads(ctx, store.ThreadQuery{Limit: 1000})
	if err != nil {
		tb.Fatal(err)
	}
	sn.listing = page.Threads
	return sn
}

func sameSnapshot(tb testing.TB, got, want *snapshot) {
	tb.Helper()
	for id, w := range want.threads {
		g := got.threads[id]
		sameThread(tb, "thread "+id, g.Thread, w.Thread)
		if g.Version != w.Version {
			tb.Fatalf("thread %s: version %d, want %d", id, g.Version, w.Version)
		}
		sameRecords(tb, "log of "+id, got.logs[id], want.logs[id])
		if got.ckpt[id] != want.ckpt[id] {
			tb.Fatalf("checkpoint of %s: %q, want %q", id, got.ckpt[id], want.ckpt[id])
		}
	}
	for id, w := range want.runs {
		sameRun(tb, "run "+id, got.runs[id], w)
	}
	if fmt.Sprint(got.active) != fmt.Sprint(want.active) {
		tb.Fatalf("active runs %v, want %v", got.active, want.active)
	}
	if len(got.listing) != len(want.listing) {
		tb.Fatalf("listing: %d threads, want %d", len(got.listing), len(want.listing))
	}
	for i := range got.listing {
		sameThread(tb, "listing", got.listing[i], want.listing[i])
	}
}

func testReopen(t *testing.T, s *suite) {
	dir := t.TempDir()
	st := s.open(t, dir)
	a := createBatch(t, "a", 3)
	a.Runs = []*store.RunRecord{newRun("ra", "a", tether.RunRunning, "ka")}
	commit(t, st, a)
	b := createBatch(t, "b", 0)
	b.Runs = []*store.RunRecord{newRun("rb", "b", tether.RunPending, ""), newRun("rb2", "b", tether.RunDone, "kb")}
	commit(t, st, b)
	commit(t, st, appendBatch(t, "a", 3, 4, "more"))
	cRecs := commit(t, st, createBatch(t, "c", 2)).Records
	if err := st.DeleteThread(ctx, "c"); err != nil { // its offsets must stay unused
		t.Fatal(err)
	}
	aLog := readAll(t, st, "a")
	if err := st.SaveCheckpoint(ctx, "a", aLog[5].Offset, []byte("ckpt")); err != nil {
		t.Fatal(err)
	}
	threads, runs := []string{"a", "b"}, []string{"ra", "rb", "rb2"}
	before := takeSnapshot(t, st, threads, runs)
	highest := maxOffset(aLog, cRecs)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	for round := range 3 {
		st = s.open(t, dir)
		sameSnapshot(t, takeSnapshot(t, st, threads, runs), before)

		// New offsets are above all old ones, old cursors still work.
		tr := threadOf(t, st, "a")
		res := commit(t, st, appendBatch(t, "a", tr.Version, 2, fmt.Sprintf("round-%d", round)))
		for _, r := range res.Records {
			if !r.Offset.After(highest) {
				t.Fatalf("round %d: new offset %q is not above %q", round, r.Offset, highest)
			}
		}
		recs, err := st.ReadEvents(ctx, "a", tr.Thread.LastOffset, 10)
		if err != nil {
			t.Fatalf("read from an offset of before the reopen: %v", err)
		}
		sameRecords(t, "read from the old tail", recs, res.Records)
		if res.Before != tr.Thread.LastOffset {
			t.Fatalf("Before %q, want %q", res.Before, tr.Thread.LastOffset)
		}
		highest = res.Records[1].Offset
		before = takeSnapshot(t, st, threads, runs)
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func testClose(t *testing.T, s *suite) {
	st := s.fresh(t)
	commit(t, st, createBatch(t, "t", 1))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	calls := map[string]error{}
	_, calls["Commit"] = st.Commit(ctx, appendBatch(t, "t", 1, 1, "closed"))
	_, calls["ReadEvents"] = st.ReadEvents(ctx, "t", tether.OffsetStart, 10)
	_, calls["Thread"] = st.Thread(ctx, "t")
	_, calls["Threads"] = st.Threads(ctx, store.ThreadQuery{})
	calls["DeleteThread"] = st.DeleteThread(ctx, "t")
	_, calls["Run"] = st.Run(ctx, "r")
	_, calls["RunByKey"] = st.RunByKey(ctx, "t", "k")
	_, calls["ActiveRuns"] = st.ActiveRuns(ctx)
	calls["SaveCheckpoint"] = st.SaveCheckpoint(ctx, "t", tether.OffsetStart, nil)
	_, _, calls["Checkpoint"] = st.Checkpoint(ctx, "t")
	for name, err := range calls {
		wantErr(t, name+" after Close", err, store.ErrClosed)
	}
	st.SetNotify(func(*store.Committed) {}) // must not panic
	_ = st.Close()                          // nor a second Close
}

// testCloseFinishesBatches closes the store while batches are in flight:
// each Commit either succeeds, and then its events are there after a
// reopen, or fails with ErrClosed.
func testCloseFinishesBatches(t *testing.T, s *suite) {
	dir := t.TempDir()
	st := s.open(t, dir)
	const threads = 8
	for i := range threads {
		commit(t, st, createBatch(t, fmt.Sprintf("t%d", i), 0))
	}
	var (
		mu   sync.Mutex
		acks = map[string][]*tether.Record{}
		wg   sync.WaitGroup
	)
	started := make(chan struct{}, threads)
	for i := range threads {
		id := fmt.Sprintf("t%d", i)
		wg.Go(func() {
			version := int64(0)
			for k := 0; ; k++ {
				res, err := st.Commit(ctx, appendBatch(t, id, version, 2, fmt.Sprintf("%s-%d", id, k)))
				if errors.Is(err, store.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("%s: %v", id, err)
					return
				}
				if k == 2 {
					started <- struct{}{}
				}
				version = res.Version
				mu.Lock()
				acks[id] = append(acks[id], res.Records...)
				mu.Unlock()
			}
		})
	}
	for range threads {
		<-started
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	st = s.open(t, dir)
	for id, recs := range acks {
		sameRecords(t, id, readAll(t, st, id), recs)
	}
}
