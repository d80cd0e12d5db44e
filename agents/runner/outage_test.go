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

// flaky is a store whose next commits that start a run fail unavailable,
// as a JetStream store's do while it has no quorum.
type flaky struct {
	store.Store
	fails atomic.Int32
}

func (f *flaky) Commit(ctx context.Context, b *store.Batch) (*store.Result, error) {
	for _, ev := range b.Events {
		if ev.Type == tether.EventRunStarted && f.fails.Add(-1) >= 0 {
			return nil, store.ErrUnavailable
		}
	}
	return f.Store.Commit(ctx, b)
}

// A claim that fails because the store is unavailable for a while does
// not stop the runner: once the store is back, runs start again without
// a restart (operations.md, "Two of three down").
func TestClaimSurvivesAStoreOutage(t *testing.T) {
	st := &flaky{Store: testutil.OpenStore(t, "")}
	st.fails.Store(1)
	e := engine.New(st, engine.Options{})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ok := agents.Func(func(ctx context.Context, s *agents.Session) error { return nil })
	rn := runner.New(e, map[string]agents.Agent{"ok": ok}, runner.Options{})
	rn.Start()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rn.Shutdown(ctx)
		e.Close()
	}()
	run := start(t, e, "ok", `{}`)
	waitStatus(t, e, run.ID, tether.RunDone)
}
