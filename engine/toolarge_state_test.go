package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// capped is a store that takes at most max events per commit and, once it
// refused a batch, holds the next read of the log (the engine catching up
// without the refused events) until released.
type capped struct {
	store.Store
	max     int
	armed   atomic.Bool
	held    chan struct{}
	release chan struct{}
}

func (s *capped) Commit(ctx context.Context, b *store.Batch) (*store.Result, error) {
	if len(b.Events) > s.max {
		s.armed.Store(true)
		return nil, fmt.Errorf("%w: %d events", store.ErrTooLarge, len(b.Events))
	}
	return s.Store.Commit(ctx, b)
}

func (s *capped) ReadEvents(ctx context.Context, threadID string, after tether.Offset, limit int) ([]*tether.Record, error) {
	if s.armed.CompareAndSwap(true, false) {
		s.held <- struct{}{}
		<-s.release
	}
	return s.Store.ReadEvents(ctx, threadID, after, limit)
}

// An append refused as too large for the store writes nothing, and the
// next append is checked on a state without it: a proxy that splits what
// the store refused, or ends its run, sends it right away. The refusal was
// answered before the engine dropped the refused events from its state, so
// a run.finished among them made the next append conflict ("run is
// finished") while the engine caught up.
func TestAppendAfterTooLargeSeesTheLogWithoutIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &capped{Store: testutil.OpenStore(t, ""), max: 4, held: make(chan struct{}), release: make(chan struct{})}
		e := newEngine(t, s, engine.Options{})
		ctx := ctxT(t)
		mustThread(t, e, "t1")
		mustRun(t, e, "t1", engine.RunRequest{})
		c := mustClaim(t, e, "echo")
		big := []*tether.Event{{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant}}
		for _, w := range []string{"a", "b", "c", "d"} {
			big = append(big, &tether.Event{Type: tether.EventTextDelta, MessageID: "m1", Delta: w})
		}
		big = append(big, &tether.Event{Type: tether.EventRunFinished, Status: string(tether.RunDone)})
		first := make(chan error, 1)
		go func() { _, err := e.Append(ctx, c.Run.ID, c.Lease.Token, big); first <- err }()
		<-s.held
		synctest.Wait()
		next := func() {
			t.Helper()
			_, err := e.Append(ctx, c.Run.ID, c.Lease.Token, []*tether.Event{
				{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant},
				{Type: tether.EventRunFinished, Status: string(tether.RunError), Error: []byte(`{"code":"x","message":"y"}`)}})
			if err != nil {
				t.Errorf("the append after the refused one: %v", err)
			}
		}
		select {
		case err := <-first:
			// Answered while the engine catches up: the run's next append
			// comes now.
			wantCode(t, err, tether.CodeTooLarge)
			next()
			close(s.release)
		default:
			close(s.release)
			wantCode(t, <-first, tether.CodeTooLarge)
			next()
		}
	})
}
