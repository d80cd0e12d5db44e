package engine_test

import (
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

func claimAs(t *testing.T, e *engine.Engine, keyID string) *engine.Claim {
	t.Helper()
	c, err := e.Claim(ctxT(t), engine.ClaimRequest{WorkerID: "w-" + keyID, Agents: []string{"echo"}, Wait: 5 * time.Second, KeyID: keyID})
	if err != nil || c == nil {
		t.Fatalf("claim: %v, %v", c, err)
	}
	return c
}

func heldBy(t *testing.T, e *engine.Engine, runID, keyID string, want bool) {
	t.Helper()
	if got, err := e.HeldBy(ctxT(t), runID, keyID); err != nil || got != want {
		t.Fatalf("HeldBy(%s, %q) = %v, %v; want %v", runID, keyID, got, err, want)
	}
}

// A lease is bound to the key that claimed it: its token under another key
// (or none) is lease_lost, for appends and heartbeats; the key of a run
// stays readable after it finished, also once the thread is reloaded.
func TestLeaseKeyBinding(t *testing.T) {
	st := testutil.OpenStore(t, "")
	e := newEngine(t, st, engine.Options{AcceptAgent: func(string) bool { return true }})
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	mustRun(t, e, "t1", engine.RunRequest{Input: userInput("hi")})
	c := claimAs(t, e, "key-a")
	ev := []*tether.Event{{Type: tether.EventCustom, Name: "x"}}
	for _, h := range []engine.Holder{{Token: c.Lease.Token, KeyID: "key-b"}, {Token: c.Lease.Token}} {
		if _, err := e.ProducerAppend(ctx, c.Run.ID, h, nil, ev); tether.CodeOf(err) != tether.CodeLeaseLost {
			t.Fatalf("append as %q: %v, want lease_lost", h.KeyID, err)
		}
		if _, err := e.Heartbeat(ctx, c.Run.ID, h); tether.CodeOf(err) != tether.CodeLeaseLost {
			t.Fatalf("heartbeat as %q: %v, want lease_lost", h.KeyID, err)
		}
	}
	own := engine.Holder{Token: c.Lease.Token, KeyID: "key-a"}
	if _, err := e.ProducerAppend(ctx, c.Run.ID, own, nil, ev); err != nil {
		t.Fatal(err)
	}
	heldBy(t, e, c.Run.ID, "key-a", true)
	heldBy(t, e, c.Run.ID, "key-b", false)
	if _, err := e.ProducerAppend(ctx, c.Run.ID, own, nil, []*tether.Event{{Type: tether.EventRunFinished, Status: "done"}}); err != nil {
		t.Fatal(err)
	}
	heldBy(t, e, c.Run.ID, "key-a", true)
	heldBy(t, e, c.Run.ID, "key-b", false)
	e2 := newEngine(t, st, engine.Options{AcceptAgent: func(string) bool { return true }})
	heldBy(t, e2, c.Run.ID, "key-a", true)
	if _, err := e.HeldBy(ctx, "run_nope", "key-a"); tether.CodeOf(err) != tether.CodeNotFound {
		t.Fatalf("HeldBy of an unknown run: %v", err)
	}
}

// A lease without a key (claimed with none, or stored before leases named
// their key) is taken by the first key that presents its token; from then
// on it is bound to it.
func TestLeaseWithoutKeyBindsOnFirstUse(t *testing.T) {
	e := newEngine(t, testutil.OpenStore(t, ""), engine.Options{AcceptAgent: func(string) bool { return true }})
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	mustRun(t, e, "t1", engine.RunRequest{Input: userInput("hi")})
	c := claimAs(t, e, "")
	heldBy(t, e, c.Run.ID, "key-a", false)
	heldBy(t, e, c.Run.ID, "", false)
	if _, err := e.Heartbeat(ctx, c.Run.ID, engine.Holder{Token: c.Lease.Token, KeyID: "key-a"}); err != nil {
		t.Fatal(err)
	}
	heldBy(t, e, c.Run.ID, "key-a", true)
	if _, err := e.Heartbeat(ctx, c.Run.ID, engine.Holder{Token: c.Lease.Token, KeyID: "key-b"}); tether.CodeOf(err) != tether.CodeLeaseLost {
		t.Fatalf("heartbeat under another key after binding: %v", err)
	}
}

// The worker rules hold on the engine's append path: after a cancel
// request only cancelled ends the run; the input is not the worker's.
func TestWorkerRulesOnAppend(t *testing.T) {
	e := newEngine(t, testutil.OpenStore(t, ""), engine.Options{AcceptAgent: func(string) bool { return true }})
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	mustRun(t, e, "t1", engine.RunRequest{Input: tether.RunInput{Messages: []tether.InputMessage{{ID: "in1", Role: tether.RoleUser, Content: "hi"}}}})
	c := mustClaim(t, e, "echo")
	if _, err := e.Append(ctx, c.Run.ID, c.Lease.Token, []*tether.Event{{Type: tether.EventMessageUpdated, MessageID: "in1", Metadata: []byte(`{"a":1}`)}}); tether.CodeOf(err) != tether.CodeBadRequest {
		t.Fatalf("message.updated of the input: %v", err)
	}
	if _, err := e.CancelRun(ctx, c.Run.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Append(ctx, c.Run.ID, c.Lease.Token, []*tether.Event{{Type: tether.EventRunFinished, Status: "done"}}); tether.CodeOf(err) != tether.CodeConflict {
		t.Fatalf("run.finished done after a cancel request: %v", err)
	}
	mustAppend(t, e, c, &tether.Event{Type: tether.EventRunFinished, Status: "cancelled"})
	snap, err := e.Run(ctx, c.Run.ID)
	if err != nil || snap.Runs[0].Status != tether.RunCancelled {
		t.Fatalf("run: %+v, %v", snap, err)
	}
}
