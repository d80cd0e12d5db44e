package engine_test

import (
	"context"
	"slices"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// A resume from an offset on a node that has not loaded the thread (as
// after a restart) does not load it: it gets the events after its cursor
// from the store, then live ones once a write loads the thread, and its
// tip is the log's.
func TestResumeDoesNotLoad(t *testing.T) {
	st := testutil.OpenStore(t, "")
	e1 := newEngine(t, st, engine.Options{})
	mustThread(t, e1, "t1")
	c := grow(t, e1, "t1", 200)
	log := readAll(t, st, "t1")
	e1.Close()

	e := newEngine(t, st, engine.Options{})
	ctx := ctxT(t)
	cursor := log[len(log)-5].Offset
	sub, err := e.Subscribe(ctx, engine.SubscribeRequest{ThreadID: "t1", Cursor: cursor})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if n := e.CachedThreads(); n != 0 {
		t.Errorf("a resume loaded %d threads", n)
	}
	if sub.Snapshot != nil || sub.Tail != log[len(log)-1].Offset || sub.Tip() != sub.Tail {
		t.Errorf("snapshot %v, tail %s, tip %s, want none and %s", sub.Snapshot != nil, sub.Tail, sub.Tip(), log[len(log)-1].Offset)
	}
	got := drain(t, sub, func(recs []*tether.Record) bool { return len(recs) >= 4 })
	var want []tether.Offset
	for _, ev := range log[len(log)-4:] {
		want = append(want, ev.Offset)
	}
	if !slices.Equal(offsets(got), want) {
		t.Fatalf("resumed with %v, want %v", offsets(got), want)
	}

	// A run's stream too, while the run goes on.
	runSub, err := e.Subscribe(ctx, engine.SubscribeRequest{RunID: c.Run.ID, Cursor: cursor})
	if err != nil {
		t.Fatal(err)
	}
	defer runSub.Close()
	if n := e.CachedThreads(); n != 0 || runSub.Snapshot != nil || runSub.ThreadID != "t1" {
		t.Errorf("a run's resume: %d threads loaded, snapshot %v, thread %q", n, runSub.Snapshot != nil, runSub.ThreadID)
	}
	got = drain(t, runSub, func(recs []*tether.Record) bool { return len(recs) >= 4 })
	for _, r := range got {
		if r.RunID != c.Run.ID {
			t.Fatalf("a run's stream got an event of run %s", r.RunID)
		}
	}

	// A worker's append loads the thread; the subscription goes on live.
	mustAppend(t, e, c, &tether.Event{Type: tether.EventTextDelta, MessageID: lastMsg(t, e, "t1"), Delta: " live"})
	live := drain(t, sub, func(recs []*tether.Record) bool { return len(recs) >= 1 })
	log = readAll(t, st, "t1")
	if live[0].Offset != log[len(log)-1].Offset || sub.Tip() != live[0].Offset {
		t.Fatalf("live %s, tip %s, want %s", live[0].Offset, sub.Tip(), log[len(log)-1].Offset)
	}

	// The run's stream ends with the run.
	mustAppend(t, e, c, finished(tether.RunDone))
	ended := drain(t, runSub, nil)
	if len(ended) != 2 || ended[1].Type != tether.EventRunFinished || !runSub.Done() {
		t.Fatalf("the run's stream ended with %d events, done %v", len(ended), runSub.Done())
	}
	log = readAll(t, st, "t1")

	// Other starts, also without a load, and a cursor not in the log,
	// which takes a reset snapshot (and so the state).
	e2 := newEngine(t, st, engine.Options{})
	for _, cur := range []tether.Offset{tether.OffsetStart, tether.OffsetNow} {
		s, err := e2.Subscribe(ctx, engine.SubscribeRequest{ThreadID: "t1", Cursor: cur})
		if err != nil {
			t.Fatal(err)
		}
		if s.Snapshot != nil || s.Tail != log[len(log)-1].Offset {
			t.Errorf("cursor %s: snapshot %v, tail %s", cur, s.Snapshot != nil, s.Tail)
		}
		s.Close()
	}
	if n := e2.CachedThreads(); n != 0 {
		t.Errorf("subscriptions from the start and from now loaded %d threads", n)
	}
	s, err := e2.Subscribe(ctx, engine.SubscribeRequest{ThreadID: "t1", Cursor: tether.FormatOffset(1, 5)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Snapshot == nil || !s.Snapshot.Reset || s.Snapshot.Offset != log[len(log)-1].Offset {
		t.Fatalf("a cursor not in the log: snapshot %+v", s.Snapshot)
	}
	// A finished run's resume takes the state: whether it ended before
	// the cursor.
	e3 := newEngine(t, st, engine.Options{})
	fin, err := e3.Subscribe(ctx, engine.SubscribeRequest{RunID: c.Run.ID, Cursor: log[len(log)-1].Offset})
	if err != nil {
		t.Fatal(err)
	}
	if !fin.Done() || e3.CachedThreads() != 1 {
		t.Errorf("a finished run's resume after its end: done %v, %d threads loaded", fin.Done(), e3.CachedThreads())
	}
	fin.Close()
	for _, id := range []string{"nope", "ds:x"} {
		_, err := e2.Subscribe(ctx, engine.SubscribeRequest{ThreadID: id, Cursor: cursor})
		wantCode(t, err, tether.CodeNotFound)
	}
}

// A resume that does not load its thread and a delete of the thread
// racing it, opened at each of its store reads: after the cursor check
// (the thread then deleted and created again with its ID) and after the
// row read. Either way the resume starts over: it gets not_found, or the
// new thread's reset snapshot, never the new thread's events after the
// deleted one's cursor.
func TestResumeAcrossDelete(t *testing.T) {
	for _, gate := range []string{"ReadEvents", "Thread"} {
		t.Run(gate, func(t *testing.T) {
			hs := newHoldStore(t)
			e1 := newHeldEngine(t, hs, engine.Options{})
			c := deletable(t, e1, "t1")
			cursor := readAll(t, hs.Store, "t1")[2].Offset
			e1.Close()
			e := newHeldEngine(t, hs, engine.Options{})

			hs.arm(gate)
			type result struct {
				sub *engine.Subscription
				err error
			}
			done := make(chan result, 1)
			go func() {
				sub, err := e.Subscribe(context.Background(), engine.SubscribeRequest{ThreadID: "t1", Cursor: cursor})
				done <- result{sub, err}
			}()
			hs.wait(t, gate)
			if err := e.DeleteThread(ctxT(t), "t1"); err != nil {
				t.Fatal(err)
			}
			if gate == "ReadEvents" {
				mustThread(t, e, "t1")
			}
			hs.release <- struct{}{}
			r := <-done
			switch {
			case r.err != nil:
				wantCode(t, r.err, tether.CodeNotFound)
			case r.sub.Snapshot == nil || !r.sub.Snapshot.Reset || len(r.sub.Snapshot.Messages) != 0:
				t.Errorf("a resume of the deleted thread: snapshot %+v, want a reset one of the new thread", r.sub.Snapshot)
			}
			if r.err == nil {
				r.sub.Close()
			}
			if gate == "Thread" {
				wantFresh(t, e, "t1", c)
			}
		})
	}
}
