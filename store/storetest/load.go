package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// testLoadThread checks what LoadThread returns: the row, the checkpoint
// if its offset is an event of the log, the records after it, paging
// continued by ReadEvents, and nothing of a deleted incarnation.
func testLoadThread(t *testing.T, s *suite) {
	st := s.fresh(t)
	_, err := st.LoadThread(ctx, "nope", 10)
	wantErr(t, "LoadThread of an unknown thread", err, store.ErrNotFound)

	commit(t, st, createBatch(t, "t", 4))
	commit(t, st, appendBatch(t, "t", 4, 5, "more"))
	log := readAll(t, st, "t")
	commit(t, st, createBatch(t, "other", 2))
	other := readAll(t, st, "other")

	ld := load(t, st, "t", 100)
	sameLoad(t, "no checkpoint", st, ld, nil, log)

	// Paged: the first records, the rest from ReadEvents after them.
	ld = load(t, st, "t", 3)
	sameLoad(t, "first page", st, ld, nil, log[:3])
	rest, err := st.ReadEvents(ctx, "t", ld.Records[2].Offset, 100)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, "after the first page", rest, log[3:])
	ld = load(t, st, "t", 0)
	sameLoad(t, "limit 0", st, ld, nil, nil)

	// With a checkpoint, the records after it.
	if err := st.SaveCheckpoint(ctx, "t", log[5].Offset, []byte("state at 5")); err != nil {
		t.Fatal(err)
	}
	ckpt := &store.Checkpoint{Offset: log[5].Offset, Data: []byte("state at 5")}
	sameLoad(t, "checkpoint", st, load(t, st, "t", 100), ckpt, log[6:])
	sameLoad(t, "checkpoint, first page", st, load(t, st, "t", 2), ckpt, log[6:8])
	if err := st.SaveCheckpoint(ctx, "t", log[8].Offset, nil); err != nil {
		t.Fatal(err)
	}
	sameLoad(t, "checkpoint at the tail", st, load(t, st, "t", 100), &store.Checkpoint{Offset: log[8].Offset, Data: []byte{}}, nil)

	// A checkpoint whose offset is no event of the log is left out.
	for _, off := range []tether.Offset{other[1].Offset, tether.OffsetStart, "junk", tether.FormatOffset(1, 1)} {
		if err := st.SaveCheckpoint(ctx, "t", off, []byte("bogus")); err != nil {
			t.Fatalf("save a checkpoint at %q: %v", off, err)
		}
		sameLoad(t, fmt.Sprintf("checkpoint at %q", off), st, load(t, st, "t", 100), nil, log)
	}

	// Deleted and created again: nothing of the old incarnation, not even
	// a checkpoint saved late with one of its offsets.
	if err := st.SaveCheckpoint(ctx, "t", log[3].Offset, []byte("old")); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteThread(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	_, err = st.LoadThread(ctx, "t", 10)
	wantErr(t, "LoadThread after delete", err, store.ErrNotFound)
	commit(t, st, createBatch(t, "t", 2))
	fresh := readAll(t, st, "t")
	sameLoad(t, "created again", st, load(t, st, "t", 100), nil, fresh)
	if err := st.SaveCheckpoint(ctx, "t", log[3].Offset, []byte("late")); err != nil {
		t.Fatal(err)
	}
	sameLoad(t, "created again, a late checkpoint of the old one", st, load(t, st, "t", 100), nil, fresh)
	_, err = st.ReadEvents(ctx, "t", log[2].Offset, 10)
	wantErr(t, "ReadEvents after an offset of the deleted incarnation", err, store.ErrOffsetNotFound)
}

func load(tb testing.TB, st store.Store, id string, limit int) *store.ThreadLoad {
	tb.Helper()
	ld, err := st.LoadThread(ctx, id, limit)
	if err != nil {
		tb.Fatalf("LoadThread(%s, %d): %v", id, limit, err)
	}
	return ld
}

// sameLoad checks a load against the thread's row, the checkpoint and the
// records it should hold.
func sameLoad(tb testing.TB, what string, st store.Store, ld *store.ThreadLoad, ckpt *store.Checkpoint, recs []*tether.Record) {
	tb.Helper()
	tr := threadOf(tb, st, ld.Thread.Thread.ID)
	sameThread(tb, what, ld.Thread.Thread, tr.Thread)
	if ld.Thread.Version != tr.Version {
		tb.Fatalf("%s: version %d, want %d", what, ld.Thread.Version, tr.Version)
	}
	switch {
	case ckpt == nil && ld.Checkpoint != nil:
		tb.Fatalf("%s: checkpoint %q %q, want none", what, ld.Checkpoint.Offset, ld.Checkpoint.Data)
	case ckpt != nil && ld.Checkpoint == nil:
		tb.Fatalf("%s: no checkpoint, want %q", what, ckpt.Offset)
	case ckpt != nil && (ld.Checkpoint.Offset != ckpt.Offset || string(ld.Checkpoint.Data) != string(ckpt.Data) || ld.Checkpoint.Data == nil):
		tb.Fatalf("%s: checkpoint %q %q, want %q %q", what, ld.Checkpoint.Offset, ld.Checkpoint.Data, ckpt.Offset, ckpt.Data)
	}
	sameRecords(tb, what, ld.Records, recs)
}

// testLoadThreadConsistent races LoadThread against a thread deleted and
// created again, over and over, each incarnation with its own events,
// metadata and checkpoint (and a checkpoint of the previous incarnation
// saved late): every load must be one incarnation, whole.
func testLoadThreadConsistent(t *testing.T, s *suite) {
	st := s.fresh(t)
	const incarnations = 40
	var (
		done    atomic.Bool
		loads   atomic.Int64
		retries atomic.Int64
		wg      sync.WaitGroup
	)
	for range 2 {
		wg.Go(func() {
			for !done.Load() {
				ld, err := st.LoadThread(ctx, "t", 1000)
				if errors.Is(err, store.ErrNotFound) {
					continue
				}
				if errors.Is(err, store.ErrUnavailable) {
					// A store may give up on a thread deleted under every
					// read it makes (this test does little else): retry.
					retries.Add(1)
					continue
				}
				if err != nil {
					t.Errorf("LoadThread: %v", err)
					return
				}
				if problem := checkIncarnation(ld); problem != "" {
					t.Errorf("a load mixes states: %s", problem)
					done.Store(true)
					return
				}
				loads.Add(1)
			}
		})
	}
	var prev tether.Offset
	for k := range incarnations {
		if done.Load() {
			break
		}
		tag := "inc-" + strconv.Itoa(k)
		b := createBatch(t, "t", 2+k%3)
		b.Thread.Metadata = json.RawMessage(`{"inc":"` + tag + `"}`)
		for i, ev := range b.Events {
			ev.Data = json.RawMessage(fmt.Sprintf(`{"tag":%q,"i":%d}`, tag, i))
			ev.Type, ev.Delta, ev.Name = tether.EventCustom, "", "storetest"
			b.Encoded[i], _ = ev.Encode()
		}
		res := commit(t, st, b)
		if prev != "" {
			// Late: a checkpoint of the deleted incarnation.
			if err := st.SaveCheckpoint(ctx, "t", prev, []byte("inc-"+strconv.Itoa(k-1)+":0")); err != nil {
				t.Fatal(err)
			}
		}
		j := k % len(res.Records)
		if err := st.SaveCheckpoint(ctx, "t", res.Records[j].Offset, []byte(tag+":"+strconv.Itoa(j))); err != nil {
			t.Fatal(err)
		}
		more := appendBatch(t, "t", res.Version, 2, tag)
		commit(t, st, more)
		prev = res.Records[0].Offset
		if err := st.DeleteThread(ctx, "t"); err != nil {
			t.Fatal(err)
		}
	}
	done.Store(true)
	wg.Wait()
	t.Logf("%d loads of a whole incarnation (%d given up as unavailable)", loads.Load(), retries.Load())
	if loads.Load() == 0 {
		t.Error("no load saw the thread")
	}
}

// checkIncarnation reports how a load mixes incarnations, "" if it does
// not: the records, the checkpoint and the row must carry the row's tag,
// and the checkpoint's place plus the records must be the version.
func checkIncarnation(ld *store.ThreadLoad) string {
	var meta struct{ Inc string }
	_ = json.Unmarshal(ld.Thread.Thread.Metadata, &meta)
	n := int64(len(ld.Records))
	if c := ld.Checkpoint; c != nil {
		tag, j, _ := strings.Cut(string(c.Data), ":")
		if tag != meta.Inc {
			return fmt.Sprintf("checkpoint of %s in a load of %s", tag, meta.Inc)
		}
		i, _ := strconv.Atoi(j)
		n += int64(i) + 1
	}
	for _, r := range ld.Records {
		if tag := tagOf(r); tag != meta.Inc {
			return fmt.Sprintf("an event of %q in a load of %q", tag, meta.Inc)
		}
	}
	if n != ld.Thread.Version {
		return fmt.Sprintf("%d events for version %d of %s", n, ld.Thread.Version, meta.Inc)
	}
	return ""
}
