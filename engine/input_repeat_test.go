package engine_test

import (
	"encoding/json"
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
