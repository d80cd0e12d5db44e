package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// A run's answered requests survive a load from a checkpoint taken after
// the answer: a client's repeat of the answer is still the same answer
// (no error, nothing appended), another value still a conflict, and the
// worker still may not ask again under the answered id. Without the
// answers in the checkpoint, the repeat after a restart was a conflict.
func TestInputRepeatedAfterCheckpointLoad(t *testing.T) {
	st := testutil.OpenStore(t, "")
	e1 := newEngine(t, st, engine.Options{CheckpointEvents: 100})
	mustThread(t, e1, "t1")
	run := mustRun(t, e1, "t1", engine.RunRequest{Input: userInput("q")})
	c := mustClaim(t, e1, "echo")
	mustAppend(t, e1, c, &tether.Event{Type: tether.EventRunWaiting, Request: &tether.Request{ID: "q1", Kind: "input"}})
	if _, err := e1.SubmitInput(ctxT(t), run.ID, "q1", json.RawMessage(`{"pick": "b"}`)); err != nil {
		t.Fatal(err)
	}
	evs := answer("a1", strings.Fields(strings.Repeat("lorem ipsum dolor ", 100))...)
	mustAppend(t, e1, c, evs[:len(evs)-1]...)
	testutil.Eventually(t, 10*time.Second, "a checkpoint", func() bool { return e1.Counters().Checkpoints.Load() > 0 })
	total := len(readAll(t, st, "t1"))
	e1.Close()

	cs := &countingStore{Store: st}
	e2 := newEngine(t, cs, engine.Options{CheckpointEvents: 100})
	r, err := e2.SubmitInput(ctxT(t), run.ID, "q1", json.RawMessage(`{"pick":"b"}`))
	if err != nil || r.Status != tether.RunRunning {
		t.Fatalf("the repeat of the answer: %+v, %v", r, err)
	}
	if !cs.ckpt.Load() {
		t.Fatal("the load got no checkpoint")
	}
	if _, err := e2.SubmitInput(ctxT(t), run.ID, "q1", json.RawMessage(`"c"`)); tether.CodeOf(err) != tether.CodeConflict {
		t.Fatalf("another answer: %v, want conflict", err)
	}
	if _, err := e2.Append(ctxT(t), c.Run.ID, c.Lease.Token, []*tether.Event{{Type: tether.EventRunWaiting,
		Request: &tether.Request{ID: "q1", Kind: "input"}}}); tether.CodeOf(err) != tether.CodeConflict {
		t.Fatalf("asking q1 again: %v, want conflict", err)
	}
	if n := len(readAll(t, st, "t1")); n != total {
		t.Fatalf("the log grew from %d to %d events", total, n)
	}
}

// A repeat of an answer whose commit is still in flight (its first try
// gave up waiting) is not taken for that answer until the commit has its
// outcome: here the commit fails, and the repeat is then the answer,
// appended once. Answered at once, it would have said the run took an
// answer that is not in the log.
func TestInputRepeatedWhileCommitInFlight(t *testing.T) {
	g := &gatedStore{Store: testutil.OpenStore(t, ""), held: make(chan struct{}, 4), release: make(chan bool, 4)}
	e := newEngine(t, g, engine.Options{})
	t.Cleanup(func() { close(g.release) })
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	run := mustRun(t, e, "t1", engine.RunRequest{})
	c := mustClaim(t, e, "echo")
	mustAppend(t, e, c, &tether.Event{Type: tether.EventRunWaiting, Request: &tether.Request{ID: "q1", Kind: "input"}})

	g.mu.Lock()
	g.gated = true
	g.mu.Unlock()
	tctx, cancel := context.WithCancel(ctx)
	tried := make(chan error, 1)
	go func() { _, err := e.SubmitInput(tctx, run.ID, "q1", json.RawMessage(`"yes"`)); tried <- err }()
	<-g.held
	cancel()
	if err := <-tried; !errors.Is(err, context.Canceled) {
		t.Fatalf("first try: %v, want it to give up", err)
	}
	repeated := make(chan error, 1)
	go func() { _, err := e.SubmitInput(ctx, run.ID, "q1", json.RawMessage(`"yes"`)); repeated <- err }()
	g.mu.Lock()
	g.gated = false
	g.mu.Unlock()
	g.release <- false // the first try's commit fails
	if err := <-repeated; err != nil {
		wantCode(t, err, tether.CodeUnavailable) // honest: the client sends it again
		if _, err := e.SubmitInput(ctx, run.ID, "q1", json.RawMessage(`"yes"`)); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, ev := range readAll(t, g, "t1") {
		if ev.Type == tether.EventRunInput {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d run.input events, want 1", n)
	}
}
