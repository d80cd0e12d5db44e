package runner_test

import (
	"context"
	"sync/atomic"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// failing is a store whose next commits (fails of them) that hold an
// event of type typ fail unavailable, as a JetStream store's do while it
// has no quorum.
type failing struct {
	store.Store
	typ   string
	fails atomic.Int32
}

func (f *failing) Commit(ctx context.Context, b *store.Batch) (*store.Result, error) {
	for _, ev := range b.Events {
		if ev.Type == f.typ && f.fails.Add(-1) >= 0 {
			return nil, store.ErrUnavailable
		}
	}
	return f.Store.Commit(ctx, b)
}

// A claim that fails because the store is unavailable for a while does
// not stop the runner: once the store is back, runs start again without
// a restart (operations.md, "Two of three down").
func TestClaimSurvivesAStoreOutage(t *testing.T) {
	st := &failing{Store: testutil.OpenStore(t, ""), typ: tether.EventRunStarted}
	st.fails.Store(1)
	ok := agents.Func(func(ctx context.Context, s *agents.Session) error { return nil })
	e, _ := worldOn(t, st, map[string]agents.Agent{"ok": ok}, engine.Options{})
	run := start(t, e, "ok", `{}`)
	waitStatus(t, e, run.ID, tether.RunDone)
}
