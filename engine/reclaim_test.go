package engine_test

import (
	"encoding/json"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// TestReclaimResumable: a worker of a resumable agent is lost while its run
// waits for a person; another worker reclaims the run, still waiting on the
// same request; the lost worker is fenced off; the answer reaches the new
// worker; the run finishes.
func TestReclaimResumable(t *testing.T) {
	st := testutil.OpenStore(t, "")
	clock := testutil.NewClock()
	e := newEngine(t, st, engine.Options{LeaseTTL: 30 * time.Second, SweepInterval: 10 * time.Millisecond, Now: clock.Now})
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	run := mustRun(t, e, "t1", engine.RunRequest{})
	a, err := e.Claim(ctx, engine.ClaimRequest{WorkerID: "a", Agents: []string{"echo"}, Resumable: true, Wait: time.Second})
	if err != nil || a == nil {
		t.Fatal(err)
	}
	mustAppend(t, e, a, &tether.Event{Type: tether.EventRunWaiting, Request: &tether.Request{ID: "q1", Kind: "approval"}})
	// Worker a is lost. Worker b (resumable too) gets the run back.
	clock.Advance(31 * time.Second)
	b, err := e.Claim(ctx, engine.ClaimRequest{WorkerID: "b", Agents: []string{"echo"}, Resumable: true, Wait: 10 * time.Second})
	if err != nil || b == nil {
		t.Fatalf("reclaim: %v %v", b, err)
	}
	if b.Run.ID != run.ID || b.Run.Attempt != 2 || b.Run.Status != tether.RunWaiting || b.Run.Request == nil || b.Run.Request.ID != "q1" || b.Run.WorkerID != "b" {
		t.Fatalf("reclaimed run: %+v", b.Run)
	}
	_, err = e.Append(ctx, run.ID, a.Lease.Token, []*tether.Event{{Type: tether.EventCustom, Name: "zombie"}})
	wantCode(t, err, tether.CodeLeaseLost)

	sub, err := e.Subscribe(ctx, engine.SubscribeRequest{RunID: run.ID, Cursor: b.Offset})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := e.SubmitInput(ctx, run.ID, "q1", json.RawMessage(`"yes"`)); err != nil {
		t.Fatal(err)
	}
	recs := drain(t, sub, func(r []*tether.Record) bool { return r[len(r)-1].Type == tether.EventRunInput })
	if recs[len(recs)-1].Type != tether.EventRunInput {
		t.Fatal("the new worker did not see the answer")
	}
	mustAppend(t, e, b, answer("m1", "approved")...)
	mustAppend(t, e, b, finished(tether.RunDone))
	for _, ev := range readAll(t, st, "t1") {
		if ev.Type == tether.EventCustom {
			t.Fatal("the lost worker's event is in the log")
		}
	}
}

func TestResumeWindowAborts(t *testing.T) {
	sw := &sweepWatch{Store: testutil.OpenStore(t, "")}
	clock := testutil.NewClock()
	e := newEngine(t, sw, engine.Options{LeaseTTL: 30 * time.Second, SweepInterval: 10 * time.Millisecond, ResumeWindow: time.Minute, Now: clock.Now})
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	run := mustRun(t, e, "t1", engine.RunRequest{})
	if c, err := e.Claim(ctx, engine.ClaimRequest{WorkerID: "a", Agents: []string{"echo"}, Resumable: true, Wait: time.Second}); err != nil || c == nil {
		t.Fatal(err)
	}
	// Nobody reclaims it: after the lease and the resume window, it ends.
	clock.Advance(31 * time.Second)
	sw.swept(t) // the sweeper queues it for a reclaim
	if snap, _ := e.Run(ctx, run.ID); snap.Runs[0].Status != tether.RunRunning {
		t.Fatalf("within the resume window the run is %s, want running", snap.Runs[0].Status)
	}
	clock.Advance(time.Minute)
	testutil.Eventually(t, 10*time.Second, "run aborted", func() bool {
		snap, _ := e.Run(ctx, run.ID)
		return snap.Runs[0].Status == tether.RunAborted
	})
	snap, _ := e.Run(ctx, run.ID)
	if snap.Runs[0].Error.Code != "worker_lost" {
		t.Fatalf("error: %+v", snap.Runs[0].Error)
	}
}

// TestTwoWorkersRace: many workers race to claim many runs; each run is
// claimed exactly once.
func TestTwoWorkersRace(t *testing.T) {
	e, _ := setup(t)
	ctx := ctxT(t)
	const n = 30
	for i := 0; i < n; i++ {
		id := "t" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		mustThread(t, e, id)
		mustRun(t, e, id, engine.RunRequest{})
	}
	got := make(chan string, 2*n)
	done := make(chan struct{})
	for w := 0; w < 4; w++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				c, err := e.Claim(ctx, engine.ClaimRequest{WorkerID: "w", Agents: []string{"echo"}, Wait: 100 * time.Millisecond})
				if err != nil {
					t.Error(err)
					return
				}
				if c == nil {
					return
				}
				got <- c.Run.ID
			}
		}()
	}
	for w := 0; w < 4; w++ {
		<-done
	}
	close(got)
	seen := map[string]bool{}
	for id := range got {
		if seen[id] {
			t.Fatalf("run %s claimed twice", id)
		}
		seen[id] = true
	}
	if len(seen) != n {
		t.Fatalf("%d runs claimed, want %d", len(seen), n)
	}
}

// A run of a resumable worker that was lost is cancelled by a client: no
// worker is left to confirm, so the cancel grace ends it cancelled
// (protocol.md §4, "Cancel"), as it does a run whose worker is alive. It
// must not wait out the resume window for a reclaim and end aborted.
func TestCancelGraceEndsLostResumableRun(t *testing.T) {
	st := testutil.OpenStore(t, "")
	clock := testutil.NewClock()
	e := newEngine(t, st, engine.Options{LeaseTTL: 30 * time.Second, CancelGrace: 10 * time.Second,
		SweepInterval: 10 * time.Millisecond, ResumeWindow: time.Hour, Now: clock.Now})
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	run := mustRun(t, e, "t1", engine.RunRequest{})
	if c, err := e.Claim(ctx, engine.ClaimRequest{WorkerID: "a", Agents: []string{"echo"}, Resumable: true, Wait: time.Second}); err != nil || c == nil {
		t.Fatal(err)
	}
	if _, err := e.CancelRun(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	// The worker is lost and the grace runs out; nobody reclaims the run.
	clock.Advance(31 * time.Second)
	testutil.Eventually(t, 10*time.Second, "run cancelled by the grace", func() bool {
		snap, _ := e.Run(ctx, run.ID)
		return snap.Runs[0].Status.Terminal()
	})
	snap, _ := e.Run(ctx, run.ID)
	if r := snap.Runs[0]; r.Status != tether.RunCancelled {
		t.Fatalf("run ended %s (%+v), want cancelled", r.Status, r.Error)
	}
}
