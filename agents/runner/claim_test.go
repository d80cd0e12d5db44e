package runner_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// gated is a store whose commits that start a run wait until open is
// closed; waiting counts them.
type gated struct {
	store.Store
	open    chan struct{}
	waiting atomic.Int32
}

func (g *gated) Commit(ctx context.Context, b *store.Batch) (*store.Result, error) {
	if slices.ContainsFunc(b.Events, func(ev *tether.Event) bool { return ev.Type == tether.EventRunStarted }) {
		g.waiting.Add(1)
		select {
		case <-g.open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Store.Commit(ctx, b)
}

// A burst of runs is claimed several at a time. Each claim waits for its
// commit, and the busier the store's writer, the longer that is: a runner
// that claimed one run at a time started a burst of 1,000 runs one commit
// after another (docs/benchmarks.md, "In-process runs at once").
func TestClaimsOfABurstCommitTogether(t *testing.T) {
	st := &gated{Store: testutil.OpenStore(t, ""), open: make(chan struct{})}
	ok := agents.Func(func(ctx context.Context, s *agents.Session) error { return nil })
	e, _ := worldOn(t, st, map[string]agents.Agent{"ok": ok}, engine.Options{})
	var once sync.Once
	release := func() { once.Do(func() { close(st.open) }) }
	t.Cleanup(release) // before the runner's shutdown, which waits for claims
	ctx := context.Background()
	const n = 4
	var ids []string
	for i := range n {
		tid := fmt.Sprintf("t%d", i)
		if _, _, err := e.CreateThread(ctx, tid, nil); err != nil {
			t.Fatal(err)
		}
		rc, err := e.CreateRun(ctx, tid, engine.RunRequest{Agent: "ok"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rc.Run.ID)
	}
	testutil.Eventually(t, 20*time.Second, fmt.Sprintf("%d claims committing at once", n), func() bool {
		return st.waiting.Load() == n
	})
	release()
	for _, id := range ids {
		waitStatus(t, e, id, tether.RunDone)
	}
}
