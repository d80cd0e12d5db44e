package engine_test

import (
	"encoding/json"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// A run created with a state sets the thread's state in the append that
// creates it: the run's claim starts with it, and a request refused (a
// state too large, another multitask than reject) writes nothing.
func TestCreateRunWithState(t *testing.T) {
	e := newEngine(t, testutil.OpenStore(t, ""), engine.Options{})
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	before, err := e.Thread(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []engine.RunRequest{
		{Agent: "echo", Input: userInput("hi"), State: json.RawMessage(`{"n":1}`), Multitask: tether.MultitaskEnqueue},
		{Agent: "echo", Input: userInput("hi"), State: json.RawMessage(`{"big":"` + strings.Repeat("x", 9<<20) + `"}`)},
	} {
		if _, err := e.CreateRun(ctx, "t1", req); err == nil {
			t.Fatalf("multitask %q, state of %d bytes: created", req.Multitask, len(req.State))
		}
	}
	if snap, _ := e.Thread(ctx, "t1"); snap.Offset != before.Offset || snap.State != nil || len(snap.Runs) != 0 {
		t.Fatalf("a refused request wrote: offset %s, state %.40s, %d runs", snap.Offset, snap.State, len(snap.Runs))
	}
	rc, err := e.CreateRun(ctx, "t1", engine.RunRequest{Agent: "echo", Input: userInput("hi"), State: json.RawMessage(`{"n": 1}`)})
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := e.Thread(ctx, "t1")
	if string(snap.State) != `{"n":1}` || snap.Runs[0].Status != tether.RunPending {
		t.Fatalf("state %s, run %s", snap.State, snap.Runs[0].Status)
	}
	c, err := e.Claim(ctx, engine.ClaimRequest{WorkerID: "w1", Agents: []string{"echo"}})
	if err != nil || c == nil || c.Run.ID != rc.Run.ID || string(c.State) != `{"n":1}` {
		t.Fatalf("claim %+v (%v)", c, err)
	}
}
