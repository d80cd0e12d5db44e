package runner_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/agents/demo"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// unreadable is a store whose next reads of events, once a run has
// started, fail unavailable: the runner's subscription to the run it has
// just claimed cannot start.
type unreadable struct {
	store.Store
	armed atomic.Bool
	fails atomic.Int32
}

func (u *unreadable) Commit(ctx context.Context, b *store.Batch) (*store.Result, error) {
	res, err := u.Store.Commit(ctx, b)
	for _, ev := range b.Events {
		if err == nil && ev.Type == tether.EventRunStarted {
			u.armed.Store(true)
		}
	}
	return res, err
}

func (u *unreadable) ReadEvents(ctx context.Context, threadID string, after tether.Offset, limit int) ([]*tether.Record, error) {
	if u.armed.Load() && u.fails.Add(-1) >= 0 {
		return nil, store.ErrUnavailable
	}
	return u.Store.ReadEvents(ctx, threadID, after, limit)
}

func (u *unreadable) ReadPage(ctx context.Context, threadID string, after tether.Offset, limit, maxBytes int) ([]*tether.Record, bool, error) {
	if u.armed.Load() && u.fails.Add(-1) >= 0 {
		return nil, false, store.ErrUnavailable
	}
	return u.Store.ReadPage(ctx, threadID, after, limit, maxBytes)
}

// A run whose follower cannot subscribe just after the claim (the store
// unavailable for a moment) still runs to its end, input included: the
// follower subscribes again. The runner gave up on the run, which stayed
// running until its lease (here an hour) ran out and ended worker_lost.
func TestSubscribeFailsAfterClaim(t *testing.T) {
	st := &unreadable{Store: testutil.OpenStore(t, "")}
	st.fails.Store(3)
	e, _ := worldOn(t, st, map[string]agents.Agent{"demo": demo.New()}, engine.Options{LeaseTTL: time.Hour})
	run := start(t, e, "demo", `{"demo":{"tokens":5,"delay_ms":0,"ask":true}}`)
	snap := waitStatus(t, e, run.ID, tether.RunWaiting)
	if _, err := e.SubmitInput(context.Background(), run.ID, snap.Runs[0].Request.ID, []byte(`"speed"`)); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e, run.ID, tether.RunDone)
	if fa, _ := e.FinalAnswer(context.Background(), "t1", run.ID); fa == nil || !strings.Contains(fa.Content, "speed") {
		t.Fatalf("answer ignores the input: %+v", fa)
	}
	if n := st.fails.Load(); n >= 0 {
		t.Fatalf("the store's reads did not fail as the test needs (%d failures left)", n+1)
	}
}
