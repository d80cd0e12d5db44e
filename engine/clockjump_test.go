package engine_test

import (
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// TestLeaseAcrossClockJumpBack steps the clock back an hour while a worker
// holds a run. Its lease, granted before the jump, still runs to the
// expiry it was given: appends after the jump are taken (a renewal to an
// earlier expiry is not written, so the lease never shrinks), and the
// sweeper leaves the run alone. Once the clock is past that expiry with no
// append, the run ends aborted (worker_lost), exactly once.
func TestLeaseAcrossClockJumpBack(t *testing.T) {
	const ttl = 10 * time.Second
	clk := newClock()
	st := testutil.OpenStore(t, "")
	held := &heldRuns{Store: st} // counts the sweeps (one read of the active runs each)
	e := newEngine(t, held, engine.Options{LeaseTTL: ttl, SweepInterval: 5 * time.Millisecond, Now: clk.now})
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	run := mustRun(t, e, "t1", engine.RunRequest{})
	c := mustClaim(t, e, "echo")
	expiry := c.Lease.ExpiresAt.Time

	clk.set(clk.now().Add(-time.Hour))
	res, err := e.Append(ctx, run.ID, c.Lease.Token, []*tether.Event{{Type: tether.EventCustom, Name: "after the jump"}})
	if err != nil {
		t.Fatalf("append after the clock went back: %v", err)
	}
	if !res.LeaseExpiresAt.Time.Equal(expiry) {
		t.Fatalf("the lease expires at %v after the jump, want %v as granted", res.LeaseExpiresAt.Time, expiry)
	}
	sweeps := held.calls.Load()
	testutil.Eventually(t, 10*time.Second, "three sweeps", func() bool { return held.calls.Load() >= sweeps+3 })
	for _, ev := range readAll(t, st, "t1") {
		if ev.Type == tether.EventRunFinished {
			t.Fatalf("the run ended (%s) after the clock went back, with its lease %v from expiry", ev.Status, expiry.Sub(clk.now()))
		}
	}

	clk.set(expiry.Add(time.Second))
	testutil.Eventually(t, 10*time.Second, "the run to end", func() bool {
		r, err := e.Run(ctx, run.ID)
		return err == nil && r.Runs[0].Status.Terminal()
	})
	sweeps = held.calls.Load()
	testutil.Eventually(t, 10*time.Second, "three more sweeps", func() bool { return held.calls.Load() >= sweeps+3 })
	finished := 0
	for _, ev := range readAll(t, st, "t1") {
		if ev.Type == tether.EventRunFinished {
			finished++
			if ev.Status != string(tether.RunAborted) || !strings.Contains(string(ev.Error), `"code":"`+engine.ReasonWorkerLost+`"`) {
				t.Errorf("the run ended %s (%s), want aborted, worker_lost", ev.Status, ev.Error)
			}
		}
	}
	if finished != 1 {
		t.Fatalf("%d run.finished, want 1", finished)
	}
}
