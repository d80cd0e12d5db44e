package engine_test

import (
	"context"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
)

func offsets(recs []*tether.Record) []tether.Offset {
	out := make([]tether.Offset, len(recs))
	for i, r := range recs {
		out[i] = r.Offset
	}
	return out
}

func TestSubscribeCursors(t *testing.T) {
	e, st := setup(t)
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	mustRun(t, e, "t1", engine.RunRequest{Input: userInput("q")})
	c := mustClaim(t, e, "echo")
	mustAppend(t, e, c, &tether.Event{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant},
		&tether.Event{Type: tether.EventTextDelta, MessageID: "m1", Delta: "one "})
	log := readAll(t, st, "t1")
	mid := log[len(log)-1].Offset

	// A late joiner: snapshot first, equal to GET thread at its offset.
	late, err := e.Subscribe(ctx, engine.SubscribeRequest{ThreadID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	snap, _ := e.Thread(ctx, "t1")
	if late.Snapshot == nil || late.Snapshot.Offset != mid || late.Snapshot.Reset || !jsonEqual(t, late.Snapshot, snap) {
		t.Fatalf("late joiner snapshot:\n%s\nwant\n%s", mustJSON(late.Snapshot), mustJSON(snap))
	}
	fromStart, _ := e.Subscribe(ctx, engine.SubscribeRequest{ThreadID: "t1", Cursor: tether.OffsetStart})
	defer fromStart.Close()
	fromMid, _ := e.Subscribe(ctx, engine.SubscribeRequest{ThreadID: "t1", Cursor: log[1].Offset})
	defer fromMid.Close()
	fromNow, _ := e.Subscribe(ctx, engine.SubscribeRequest{ThreadID: "t1", Cursor: tether.OffsetNow})
	defer fromNow.Close()
	bogus, _ := e.Subscribe(ctx, engine.SubscribeRequest{ThreadID: "t1", Cursor: tether.FormatOffset(1, 999999)})
	defer bogus.Close()
	if bogus.Snapshot == nil || !bogus.Snapshot.Reset || bogus.Snapshot.Offset != mid {
		t.Fatalf("unknown cursor: %+v", bogus.Snapshot)
	}
	if fromStart.Snapshot != nil || fromMid.Snapshot != nil || fromNow.Snapshot != nil {
		t.Fatal("a subscription with a valid cursor got a snapshot")
	}

	mustAppend(t, e, c, &tether.Event{Type: tether.EventTextDelta, MessageID: "m1", Delta: "two"},
		&tether.Event{Type: tether.EventMessageFinished, MessageID: "m1", Status: "done"}, finished(tether.RunDone))
	log = readAll(t, st, "t1")
	tail := log[len(log)-1].Offset
	until := func(recs []*tether.Record) bool { return recs[len(recs)-1].Offset == tail }

	check := func(name string, sub *engine.Subscription, from int) {
		got := offsets(drain(t, sub, until))
		want := make([]tether.Offset, 0)
		for _, ev := range log[from:] {
			want = append(want, ev.Offset)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: got %d events, want %d", name, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: event %d is %s, want %s", name, i, got[i], want[i])
			}
		}
	}
	check("from start", fromStart, 0)
	check("from the second event", fromMid, 2)
	check("late joiner", late, len(log)-3)
	check("from now", fromNow, len(log)-3)
	check("unknown cursor", bogus, len(log)-3)
}

func TestRunAndMessageSubscriptionsEnd(t *testing.T) {
	e, _ := setup(t)
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	run := mustRun(t, e, "t1", engine.RunRequest{})
	c := mustClaim(t, e, "echo")
	mustAppend(t, e, c, &tether.Event{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant},
		&tether.Event{Type: tether.EventMessageStarted, MessageID: "m2", Role: tether.RoleAssistant})

	runSub, err := e.Subscribe(ctx, engine.SubscribeRequest{RunID: run.ID, Cursor: tether.OffsetStart})
	if err != nil {
		t.Fatal(err)
	}
	defer runSub.Close()
	msgSub, err := e.Subscribe(ctx, engine.SubscribeRequest{ThreadID: "t1", MessageID: "m1", Cursor: tether.OffsetStart})
	if err != nil {
		t.Fatal(err)
	}
	defer msgSub.Close()
	abortedMsg, _ := e.Subscribe(ctx, engine.SubscribeRequest{ThreadID: "t1", MessageID: "m2"})
	defer abortedMsg.Close()
	typed, _ := e.Subscribe(ctx, engine.SubscribeRequest{RunID: run.ID, Types: []string{tether.EventTextDelta}, Cursor: tether.OffsetStart})
	defer typed.Close()

	mustAppend(t, e, c, answer("m3", "x")...)
	mustAppend(t, e, c, &tether.Event{Type: tether.EventTextDelta, MessageID: "m1", Delta: "hi"},
		&tether.Event{Type: tether.EventMessageFinished, MessageID: "m1", Status: "done"})
	// m2 is still running when the run finishes: the run's end finishes it.
	mustAppend(t, e, c, finished(tether.RunError))

	if got := types(decodeAll(t, drain(t, msgSub, nil))); got != "message.started text.delta message.finished" {
		t.Fatalf("message subscription: %s", got)
	}
	if got := types(decodeAll(t, drain(t, abortedMsg, nil))); got != "run.finished" {
		t.Fatalf("subscription of a message its run finished: %s", got)
	}
	recs := drain(t, runSub, nil)
	if last := recs[len(recs)-1]; last.Type != tether.EventRunFinished {
		t.Fatalf("run subscription ended with %s", last.Type)
	}
	if got := types(decodeAll(t, drain(t, typed, nil))); got != "text.delta text.delta" {
		t.Fatalf("typed subscription: %s", got)
	}

	// A run subscription that starts after the run ended ends at once.
	after, _ := e.Subscribe(ctx, engine.SubscribeRequest{RunID: run.ID, Cursor: recs[len(recs)-1].Offset})
	defer after.Close()
	if !after.Done() {
		t.Fatal("subscription after run.finished is not done")
	}
	snapSub, _ := e.Subscribe(ctx, engine.SubscribeRequest{RunID: run.ID})
	defer snapSub.Close()
	if !snapSub.Done() || snapSub.Snapshot == nil || snapSub.Snapshot.Runs[0].Status != tether.RunError {
		t.Fatalf("snapshot of a finished run: done=%v %+v", snapSub.Done(), snapSub.Snapshot)
	}
	_, err = e.Subscribe(ctx, engine.SubscribeRequest{ThreadID: "t1", MessageID: "nope"})
	wantCode(t, err, tether.CodeNotFound)
	_, err = e.Subscribe(ctx, engine.SubscribeRequest{RunID: "run_nope"})
	wantCode(t, err, tether.CodeNotFound)
	_, err = e.Subscribe(context.Background(), engine.SubscribeRequest{ThreadID: "nope"})
	wantCode(t, err, tether.CodeNotFound)
}

func decodeAll(t *testing.T, recs []*tether.Record) []*tether.Event {
	t.Helper()
	out := make([]*tether.Event, len(recs))
	for i, r := range recs {
		ev, err := r.Decode()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = ev
	}
	return out
}
