package engine_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// lagging is a node's view of a shared store whose notifications can be
// held (the node falls behind) and whose Thread reads can fail (the store
// cannot say whether the node is behind).
type lagging struct {
	nodeView
	mu      sync.Mutex
	fn      func(*store.Committed)
	held    []*store.Committed
	holding bool
	down    atomic.Bool
}

func (l *lagging) SetNotify(fn func(*store.Committed)) {
	l.mu.Lock()
	l.fn = fn
	l.mu.Unlock()
	l.nodeView.SetNotify(func(c *store.Committed) {
		l.mu.Lock()
		if l.holding {
			l.held = append(l.held, c)
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		fn(c)
	})
}

func (l *lagging) hold() {
	l.mu.Lock()
	l.holding = true
	l.mu.Unlock()
}

func (l *lagging) release() {
	l.mu.Lock()
	held := l.held
	l.held, l.holding = nil, false
	fn := l.fn
	l.mu.Unlock()
	for _, c := range held {
		fn(c)
	}
}

func (l *lagging) Thread(ctx context.Context, id string) (*store.ThreadRecord, error) {
	if l.down.Load() {
		return nil, store.ErrUnavailable
	}
	return l.nodeView.Thread(ctx, id)
}

// TestRefusalNeedsTheStore: node b has not been notified of an append
// made through node a, so its copy of the producer's state is old, and
// the store cannot be read: the next append through b is answered
// unavailable (retry), not with a gap in the producer's sequence that is
// not there. Once b catches up, the append goes.
func TestRefusalNeedsTheStore(t *testing.T) {
	sh := newShared(testutil.OpenStore(t, ""))
	a := newEngine(t, nodeView{sh, 0}, engine.Options{NodeID: "a"})
	lb := &lagging{nodeView: nodeView{sh, 1}}
	b := newEngine(t, lb, engine.Options{NodeID: "b"})
	ctx := ctxT(t)
	mustThread(t, a, "t1")
	run := mustRun(t, a, "t1", engine.RunRequest{})
	c := mustClaim(t, a, "echo")
	produce := func(e *engine.Engine, seq int64) error {
		_, err := e.ProducerAppend(ctx, run.ID, engine.Holder{Token: c.Lease.Token}, &engine.Producer{ID: "w", Seq: seq},
			[]*tether.Event{{Type: tether.EventCustom, Name: "x"}})
		return err
	}
	if err := produce(b, 0); err != nil {
		t.Fatal(err)
	}
	lb.hold()
	if err := produce(a, 1); err != nil {
		t.Fatal(err)
	}
	lb.down.Store(true)
	wantCode(t, produce(b, 2), tether.CodeUnavailable)
	lb.down.Store(false)
	lb.release()
	if err := produce(b, 2); err != nil {
		t.Fatalf("append through b once it caught up: %v", err)
	}
}
