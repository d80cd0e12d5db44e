package runner_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/agents/runner"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// A run whose agent returned while the store could not take its
// run.finished for a moment still ends as its agent did, once the store
// is back: the runner tries again. It gave up at once, and the run stayed
// running until its lease (here an hour) ran out and ended worker_lost.
func TestFinishRetriedWhileStoreUnavailable(t *testing.T) {
	st := &failing{Store: testutil.OpenStore(t, ""), typ: tether.EventRunFinished}
	st.fails.Store(2)
	ok := agents.Func(func(ctx context.Context, s *agents.Session) error { return nil })
	e, _ := worldOn(t, st, map[string]agents.Agent{"ok": ok}, engine.Options{LeaseTTL: time.Hour})
	run := start(t, e, "ok", `{}`)
	waitStatus(t, e, run.ID, tether.RunDone)
}

// lost is a store that commits the next run.finished but answers as if it
// could not: the outcome is unknown to the runner.
type lost struct {
	store.Store
	fails atomic.Int32
}

func (l *lost) Commit(ctx context.Context, b *store.Batch) (*store.Result, error) {
	res, err := l.Store.Commit(ctx, b)
	for _, ev := range b.Events {
		if err == nil && ev.Type == tether.EventRunFinished && l.fails.Add(-1) >= 0 {
			return nil, store.ErrUnavailable
		}
	}
	return res, err
}

// A run.finished that was committed though its append failed is not sent
// twice: the run sent again is refused (nothing follows a run.finished),
// and the log holds one.
func TestFinishOfUnknownOutcomeNotDoubled(t *testing.T) {
	st := &lost{Store: testutil.OpenStore(t, "")}
	st.fails.Store(1)
	e := engine.New(st, engine.Options{LeaseTTL: time.Hour})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ok := agents.Func(func(ctx context.Context, s *agents.Session) error { return nil })
	rn := runner.New(e, map[string]agents.Agent{"ok": ok}, runner.Options{})
	rn.Start()
	run := start(t, e, "ok", `{}`)
	waitStatus(t, e, run.ID, tether.RunDone)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rn.Shutdown(ctx)
	e.Close()
	recs, err := st.ReadEvents(context.Background(), "t1", tether.OffsetStart, 100)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		if r.Type == tether.EventRunFinished {
			n++
		}
	}
	if n != 1 || recs[len(recs)-1].Type != tether.EventRunFinished {
		t.Fatalf("%d run.finished in the log, want 1, last", n)
	}
}

// counting is failing that also counts the commits of typ it refused.
type counting struct {
	failing
	tried atomic.Int32
}

func (c *counting) Commit(ctx context.Context, b *store.Batch) (*store.Result, error) {
	for _, ev := range b.Events {
		if ev.Type == c.typ && c.fails.Load() > 0 {
			c.tried.Add(1)
		}
	}
	return c.failing.Commit(ctx, b)
}

// A run.finished (done) whose outcome was unknown, then a client's cancel
// before it was sent again: the resend is refused (a run asked to cancel
// ends cancelled), and the runner ends the run cancelled at once. It took
// the refusal for the end, and the run stayed running for the cancel
// grace (here an hour).
func TestFinishInDoubtThenCancel(t *testing.T) {
	st := &counting{failing: failing{Store: testutil.OpenStore(t, ""), typ: tether.EventRunFinished}}
	st.fails.Store(1 << 20)
	ok := agents.Func(func(ctx context.Context, s *agents.Session) error { return nil })
	e, _ := worldOn(t, st, map[string]agents.Agent{"ok": ok}, engine.Options{LeaseTTL: time.Hour, CancelGrace: time.Hour})
	run := start(t, e, "ok", `{}`)
	testutil.Eventually(t, 10*time.Second, "a run.finished tried", func() bool { return st.tried.Load() > 0 })
	if _, err := e.CancelRun(context.Background(), run.ID); err != nil {
		t.Fatal(err)
	}
	st.fails.Store(0)
	waitStatus(t, e, run.ID, tether.RunCancelled)
}
