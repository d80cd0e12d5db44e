package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// smallStore takes at most max events per commit, as JetStream takes at
// most one message's worth, and can hold commits at a gate.
type smallStore struct {
	store.Store
	max     int
	mu      sync.Mutex
	gated   bool
	held    chan struct{}
	release chan struct{}
	sizes   []int // events of each batch committed
}

func (s *smallStore) Commit(ctx context.Context, b *store.Batch) (*store.Result, error) {
	if len(b.Events) > s.max {
		return nil, fmt.Errorf("%w: %d events", store.ErrTooLarge, len(b.Events))
	}
	s.mu.Lock()
	gated := s.gated
	s.gated = false
	s.mu.Unlock()
	if gated {
		s.held <- struct{}{}
		<-s.release
	}
	res, err := s.Store.Commit(ctx, b)
	if err == nil {
		s.mu.Lock()
		s.sizes = append(s.sizes, len(b.Events))
		s.mu.Unlock()
	}
	return res, err
}

// Appends queued while a commit is in flight are combined into one batch;
// a store that refuses it as too large gets them in smaller batches, all
// in order. An append too large on its own is refused with too_large and
// writes nothing; those queued behind it still land.
func TestBatchTooLargeForTheStore(t *testing.T) {
	s := &smallStore{Store: testutil.OpenStore(t, ""), max: 8, held: make(chan struct{}), release: make(chan struct{})}
	e := newEngine(t, s, engine.Options{})
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	mustRun(t, e, "t1", engine.RunRequest{})
	c := mustClaim(t, e, "echo")
	mustAppend(t, e, c, &tether.Event{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant})
	deltas := func(words ...string) []*tether.Event {
		var evs []*tether.Event
		for _, w := range words {
			evs = append(evs, &tether.Event{Type: tether.EventTextDelta, MessageID: "m1", Delta: w})
		}
		return evs
	}

	// The first append is held in its commit; five more queue behind it,
	// 15 events together, one of them too large on its own.
	s.mu.Lock()
	s.gated = true
	s.mu.Unlock()
	first := make(chan error, 1)
	go func() { _, err := e.Append(ctx, c.Run.ID, c.Lease.Token, deltas("a")); first <- err }()
	<-s.held
	type result struct {
		i   int
		err error
	}
	results := make(chan result, 6)
	sends := [][]*tether.Event{deltas("b1", "b2", "b3"), deltas("c1", "c2", "c3"), deltas(
		"x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9"), deltas("d1", "d2", "d3"), deltas("e1", "e2", "e3")}
	var wg sync.WaitGroup
	for i, evs := range sends {
		queued := engine.QueuedPlans(e, "t1")
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.Append(ctx, c.Run.ID, c.Lease.Token, evs)
			results <- result{i, err}
		}()
		// Queue them in this order.
		for engine.QueuedPlans(e, "t1") == queued {
			time.Sleep(time.Millisecond)
		}
	}
	close(s.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(results)
	for r := range results {
		if r.i == 2 {
			wantCode(t, r.err, tether.CodeTooLarge)
		} else if r.err != nil {
			t.Errorf("append %d: %v", r.i, r.err)
		}
	}
	var text string
	for _, ev := range readAll(t, s, "t1") {
		if ev.Type == tether.EventTextDelta {
			text += ev.Delta
		}
	}
	if text != "ab1b2b3c1c2c3d1d2d3e1e2e3" {
		t.Fatalf("the log's text %q", text)
	}
	for _, n := range s.sizes {
		if n > s.max {
			t.Fatalf("a batch of %d events was committed", n)
		}
	}
}
