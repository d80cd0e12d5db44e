package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/natsstore"
	"github.com/tetherhq/tether/store/natsstore/natstest"
)

// A lease renewed through one node (a heartbeat: a run row, no event) is
// not seen by the other nodes until they read the store. These tests take
// the nodes through that window on a clock of their own: the renewal must
// win, whichever node decides next.

// clock is a settable time shared by the nodes of a test.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) now() time.Time         { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) set(t time.Time)        { c.ns.Store(t.UnixNano()) }
func (c *clock) until(t time.Time) bool { return c.now().Before(t) }

// heldRuns is a node's view of the store whose ActiveRuns can be made to
// run a function after its read and before it answers: the sweeper then
// decides on rows older than what the store holds by then.
type heldRuns struct {
	store.Store
	mu    sync.Mutex
	after func() // run once by the next ActiveRuns, then cleared
	calls atomic.Int64
}

func (h *heldRuns) ActiveRuns(ctx context.Context) ([]*store.RunRecord, error) {
	rows, err := h.Store.ActiveRuns(ctx)
	h.mu.Lock()
	fn := h.after
	h.after = nil
	h.mu.Unlock()
	if fn != nil {
		fn()
	}
	h.calls.Add(1)
	return rows, err
}

// ThreadRun keeps the inner store's exact read of a thread's run.
func (h *heldRuns) ThreadRun(ctx context.Context, threadID, runID string) (*store.RunRecord, error) {
	if r, ok := h.Store.(store.ThreadRunReader); ok {
		return r.ThreadRun(ctx, threadID, runID)
	}
	return h.Store.Run(ctx, runID)
}

func (h *heldRuns) hold(fn func()) {
	h.mu.Lock()
	h.after = fn
	h.mu.Unlock()
}

// leaseNodes starts two engines sharing a store on clk, on SQLite (one
// store, its notifications shared) or on one NATS server (a store each).
// The first engine's ActiveRuns can be held.
func leaseNodes(t *testing.T, kind string, clk *clock, ttl time.Duration) (a, b *engine.Engine, held *heldRuns, st store.Store) {
	t.Helper()
	opts := engine.Options{LeaseTTL: ttl, SweepInterval: 5 * time.Millisecond, Now: clk.now}
	var stores [2]store.Store
	switch kind {
	case "sqlite":
		sh := newShared(testutil.OpenStore(t, ""))
		stores = [2]store.Store{nodeView{sh, 0}, nodeView{sh, 1}}
		st = sh.Store
	case "nats":
		opts.SweepInterval = 20 * time.Millisecond
		url := natstest.StartServer(t).ClientURL()
		for i := range stores {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			ns, err := natsstore.Open(ctx, natsstore.Options{URL: url, Node: fmt.Sprint("node-", i), Logger: slog.New(slog.DiscardHandler)})
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ns.Close() })
			stores[i] = ns
		}
		st = stores[1]
	}
	held = &heldRuns{Store: stores[0]}
	oa, ob := opts, opts
	oa.NodeID, ob.NodeID = "node-a", "node-b"
	return newEngine(t, held, oa), newEngine(t, stores[1], ob), held, st
}

func eachLeaseStore(t *testing.T, fn func(t *testing.T, kind string)) {
	for _, kind := range []string{"sqlite", "nats"} {
		t.Run(kind, func(t *testing.T) { fn(t, kind) })
	}
}

// TestLeaseRenewedElsewhereHolds: a worker claims a run through node a,
// then heartbeats through node b shortly before the lease expires. After
// the expiry a granted, and well before the one b granted, the worker
// appends through a: its lease holds.
func TestLeaseRenewedElsewhereHolds(t *testing.T) {
	eachLeaseStore(t, func(t *testing.T, kind string) {
		const ttl = 10 * time.Second
		clk := newClock()
		a, b, _, _ := leaseNodes(t, kind, clk, ttl)
		ctx := ctxT(t)
		mustThread(t, a, "t1")
		run := mustRun(t, a, "t1", engine.RunRequest{})
		c := mustClaim(t, a, "echo")
		first := c.Lease.ExpiresAt.Time

		clk.set(first.Add(-time.Second))
		hb, err := b.Heartbeat(ctx, run.ID, engine.Holder{Token: c.Lease.Token})
		if err != nil {
			t.Fatalf("heartbeat through b: %v", err)
		}
		renewed := hb.LeaseExpiresAt.Time
		if !renewed.After(first) {
			t.Fatalf("b renewed the lease to %v, not after %v", renewed, first)
		}

		clk.set(first.Add(time.Second))
		if _, err := a.Append(ctx, run.ID, c.Lease.Token, []*tether.Event{{Type: tether.EventCustom, Name: "after"}}); err != nil {
			t.Fatalf("append through a %v after the first expiry, %v before the renewed one: %v",
				clk.now().Sub(first), renewed.Sub(clk.now()), err)
		}
	})
}

// TestSweepAfterRenewalElsewhere: node a's sweeper reads the active runs
// just before a heartbeat through node b renews a run's lease, and decides
// after the expiry it read (a's own, as it granted the lease). The run is
// not aborted: the renewal came first.
func TestSweepAfterRenewalElsewhere(t *testing.T) {
	eachLeaseStore(t, func(t *testing.T, kind string) {
		const ttl = 10 * time.Second
		clk := newClock()
		a, b, held, st := leaseNodes(t, kind, clk, ttl)
		ctx := ctxT(t)
		mustThread(t, a, "t1")
		run := mustRun(t, a, "t1", engine.RunRequest{})
		c := mustClaim(t, a, "echo")
		first := c.Lease.ExpiresAt.Time

		clk.set(first.Add(-time.Second))
		var renewed time.Time
		var hbErr error
		done := make(chan struct{})
		held.hold(func() {
			// a's sweeper has read the rows; b renews; time passes the
			// expiry a read.
			var hb *engine.AppendResult
			if hb, hbErr = b.Heartbeat(ctx, run.ID, engine.Holder{Token: c.Lease.Token}); hbErr == nil {
				renewed = hb.LeaseExpiresAt.Time
			}
			clk.set(first.Add(time.Second))
			close(done)
		})
		<-done
		if hbErr != nil {
			t.Fatalf("heartbeat through b: %v", hbErr)
		}
		// The next read of the active runs starts the next sweep: the one
		// that decided on the held rows is over.
		n := held.calls.Load()
		testutil.Eventually(t, 10*time.Second, "the next sweep", func() bool { return held.calls.Load() > n+1 })
		if !clk.until(renewed) {
			t.Fatalf("the clock passed the renewed expiry")
		}
		for _, ev := range readAll(t, st, "t1") {
			if ev.Type == tether.EventRunFinished {
				t.Fatalf("the run ended (%s, %s) %v before the expiry b had granted", ev.Status, ev.Error, renewed.Sub(clk.now()))
			}
		}
		if _, err := b.Append(ctx, run.ID, c.Lease.Token, []*tether.Event{{Type: tether.EventCustom, Name: "after"}}); err != nil {
			t.Fatalf("append after the sweep: %v", err)
		}
	})
}
