package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// A thread with every kind of content (tool calls, reasoning, state
// snapshots and patches, custom events, a finished run, a run of this node
// cut off mid-message and mid-tool-call, a queued run) is checkpointed
// and the process dies. After a restart, and another one, its snapshot is
// the one the whole log folds to, the cut-off run ended with exactly one
// run.finished, and the thread takes appends.
func TestRestartFromCheckpointMidRun(t *testing.T) {
	dir := t.TempDir()
	st := testutil.OpenStore(t, dir)
	opts := engine.Options{NodeID: "n1", CheckpointEvents: 1}
	e := engine.New(st, opts)
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	mustThread(t, e, "t")
	mustRun(t, e, "t", engine.RunRequest{Input: userInput("first")})
	c := mustClaim(t, e, "echo")
	mustAppend(t, e, c,
		&tether.Event{Type: tether.EventStateSnapshot, State: json.RawMessage(`{"n":1,"tags":["a"]}`)},
		&tether.Event{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant},
		&tether.Event{Type: tether.EventReasoningDelta, MessageID: "m1", Delta: "thinking"},
		&tether.Event{Type: tether.EventToolStarted, MessageID: "m1", CallID: "c1", Name: "search"},
		&tether.Event{Type: tether.EventToolDelta, MessageID: "m1", CallID: "c1", Delta: `{"q":`},
		&tether.Event{Type: tether.EventToolDelta, MessageID: "m1", CallID: "c1", Delta: `"x"}`},
		&tether.Event{Type: tether.EventToolFinished, MessageID: "m1", CallID: "c1", Output: json.RawMessage(`{"hits":3}`)},
		&tether.Event{Type: tether.EventTextDelta, MessageID: "m1", Delta: "found 3"},
		&tether.Event{Type: tether.EventMessageFinished, MessageID: "m1", Status: "done"},
		&tether.Event{Type: tether.EventStateDelta, Patch: json.RawMessage(`[{"op":"replace","path":"/n","value":2},{"op":"add","path":"/tags/-","value":"b"}]`)},
		&tether.Event{Type: tether.EventCustom, Name: "progress", Data: json.RawMessage(`{"pct":50}`)},
		finished(tether.RunDone))

	local := mustRun(t, e, "t", engine.RunRequest{Agent: "demo", Input: userInput("second")})
	lc, err := e.Claim(ctx, engine.ClaimRequest{WorkerID: "inproc", Agents: []string{"demo"}, Local: true, Wait: time.Second})
	if err != nil || lc == nil || lc.Run.ID != local.ID {
		t.Fatalf("local claim: %+v %v", lc, err)
	}
	mustAppend(t, e, lc,
		&tether.Event{Type: tether.EventStateDelta, Patch: json.RawMessage(`[{"op":"replace","path":"/n","value":3}]`)},
		&tether.Event{Type: tether.EventMessageStarted, MessageID: "m2", Role: tether.RoleAssistant},
		&tether.Event{Type: tether.EventTextDelta, MessageID: "m2", Delta: "half an ans"},
		&tether.Event{Type: tether.EventToolStarted, MessageID: "m2", CallID: "c2", Name: "slow"})
	queued := mustRun(t, e, "t", engine.RunRequest{Agent: "demo", Multitask: tether.MultitaskEnqueue, Input: userInput("third")})
	testutil.Eventually(t, 10*time.Second, "a checkpoint", func() bool { return e.Counters().Checkpoints.Load() > 0 })
	if _, _, err := st.Checkpoint(ctx, "t"); err != nil {
		t.Fatalf("no checkpoint: %v", err)
	}
	// The process dies: nothing is finished.
	e.Close()
	st.Close()

	var snaps []string
	for range 2 {
		st := testutil.OpenStore(t, dir)
		e := newEngine(t, st, opts)
		snaps = append(snaps, snapJSON(t, e, "t"))
		e.Close()
		st.Close()
	}
	if snaps[0] != snaps[1] {
		t.Fatalf("the second restart changed the thread:\n%s\nthen\n%s", snaps[0], snaps[1])
	}

	// The whole log, folded without the checkpoint.
	st = testutil.OpenStore(t, dir)
	off, _, err := st.Checkpoint(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SaveCheckpoint(ctx, "t", off, []byte("spoilt")); err != nil {
		t.Fatal(err)
	}
	e = newEngine(t, st, engine.Options{NodeID: "n1", CheckpointEvents: -1})
	if got := snapJSON(t, e, "t"); got != snaps[0] {
		t.Fatalf("from the checkpoint:\n%s\nfrom the log:\n%s", snaps[0], got)
	}
	ends := 0
	for _, ev := range readAll(t, st, "t") {
		if ev.Type == tether.EventRunFinished && ev.RunID == local.ID {
			ends++
		}
	}
	if ends != 1 {
		t.Fatalf("the cut-off run has %d run.finished events, want 1", ends)
	}
	snap, err := e.Run(ctx, local.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r := snap.Runs[0]; r.Status != tether.RunAborted || r.Error == nil || r.Error.Code != engine.ReasonServerRestart {
		t.Fatalf("cut-off run: %+v", r)
	}
	qc, err := e.Claim(ctx, engine.ClaimRequest{WorkerID: "inproc", Agents: []string{"demo"}, Local: true, Wait: time.Second})
	if err != nil || qc == nil || qc.Run.ID != queued.ID {
		t.Fatalf("queued run after the restarts: %+v %v", qc, err)
	}
	mustAppend(t, e, qc, answer("m3", "ok")...)
}
