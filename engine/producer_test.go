package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

func TestProducerRules(t *testing.T) {
	dir := t.TempDir()
	st := testutil.OpenStore(t, dir)
	e := newEngine(t, st, engine.Options{})
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	mustRun(t, e, "t1", engine.RunRequest{})
	c := mustClaim(t, e, "echo")
	send := func(epoch, seq int64, evs ...*tether.Event) (*engine.AppendResult, error) {
		return e.ProducerAppend(ctx, c.Run.ID, engine.Holder{Token: c.Lease.Token}, &engine.Producer{ID: "w1", Epoch: epoch, Seq: seq}, evs)
	}
	custom := func(name string) *tether.Event { return &tether.Event{Type: tether.EventCustom, Name: name} }
	logLen := func() int { return len(readAll(t, st, "t1")) }

	// A new producer starts at 0.
	_, err := send(0, 3, custom("a"))
	var pe *engine.ProducerError
	if !errors.As(err, &pe) || pe.Err.Code != tether.CodeConflict || pe.ExpectedSeq != 0 || pe.ReceivedSeq != 3 {
		t.Fatalf("first append with seq 3: %v", err)
	}
	res, err := send(0, 0, custom("a"))
	if err != nil || res.Duplicate || res.Producer.Seq != 0 {
		t.Fatalf("seq 0: %+v %v", res, err)
	}
	n := logLen()
	// A retry is a duplicate: nothing appended, even though its events
	// would now be invalid.
	res, err = send(0, 0, &tether.Event{Type: tether.EventMessageStarted, MessageID: "x", Role: tether.RoleAssistant})
	if err != nil || !res.Duplicate || logLen() != n {
		t.Fatalf("duplicate: %+v %v (log %d → %d)", res, err, n, logLen())
	}
	if _, err := send(0, 1, custom("b")); err != nil {
		t.Fatal(err)
	}
	_, err = send(0, 5, custom("c"))
	if !errors.As(err, &pe) || pe.ExpectedSeq != 2 || pe.ReceivedSeq != 5 {
		t.Fatalf("gap: %v", err)
	}
	// A new epoch must start at 0, then fences the old one.
	_, err = send(1, 4, custom("d"))
	wantCode(t, err, tether.CodeBadRequest)
	if _, err := send(1, 0, custom("d")); err != nil {
		t.Fatal(err)
	}
	_, err = send(0, 2, custom("zombie"))
	if !errors.As(err, &pe) || pe.Err.Code != tether.CodeForbidden || pe.Epoch != 1 {
		t.Fatalf("stale epoch: %v", err)
	}
	// A rejected append does not use up its sequence number.
	_, err = send(1, 1, &tether.Event{Type: tether.EventTextDelta, MessageID: "nope", Delta: "x"})
	wantCode(t, err, tether.CodeBadRequest)
	if _, err := send(1, 1, custom("e"), finished(tether.RunDone)); err != nil {
		t.Fatal(err)
	}
	// The final append's retry after the run finished is still a
	// duplicate, not a conflict: its events are in the log.
	n = logLen()
	if res, err := send(1, 1, custom("e"), finished(tether.RunDone)); err != nil || !res.Duplicate || logLen() != n {
		t.Fatalf("retry of the last append: %+v %v", res, err)
	}

	// The producer's state is durable: a new engine on the same store
	// (after a crash) still knows it.
	e.Close()
	st.Close()
	st2 := testutil.OpenStore(t, dir)
	e2 := newEngine(t, st2, engine.Options{})
	res, err = e2.ProducerAppend(ctx, c.Run.ID, engine.Holder{Token: c.Lease.Token}, &engine.Producer{ID: "w1", Epoch: 1, Seq: 1}, []*tether.Event{custom("e")})
	if err != nil || !res.Duplicate {
		t.Fatalf("duplicate after restart: %+v %v", res, err)
	}
	_, err = e2.ProducerAppend(ctx, c.Run.ID, engine.Holder{Token: c.Lease.Token}, &engine.Producer{ID: "w1", Epoch: 1, Seq: 2}, []*tether.Event{custom("f")})
	wantCode(t, err, tether.CodeConflict) // the run is finished
	_, err = e2.ProducerAppend(ctx, c.Run.ID, engine.Holder{Token: c.Lease.Token}, &engine.Producer{ID: "", Epoch: 0, Seq: 0}, []*tether.Event{custom("f")})
	wantCode(t, err, tether.CodeBadRequest)
}

// gatedStore holds commits at a gate while gated is set; each held commit
// then fails or goes through, as the test says on release.
type gatedStore struct {
	store.Store
	mu      sync.Mutex
	gated   bool
	held    chan struct{} // a commit arrived at the gate
	release chan bool     // true: commit it; false: fail it
}

func (g *gatedStore) Commit(ctx context.Context, b *store.Batch) (*store.Result, error) {
	g.mu.Lock()
	gated := g.gated
	g.mu.Unlock()
	if gated && !b.Create {
		g.held <- struct{}{}
		if !<-g.release {
			return nil, fmt.Errorf("the disk went away")
		}
	}
	return g.Store.Commit(ctx, b)
}

// A retry of an append whose commit is still in flight is not a duplicate
// yet: if that commit fails, the retry must not have answered "already in
// the log". It waits for the commit's outcome, then counts as a duplicate
// or appends.
func TestProducerRetryWhileCommitInFlight(t *testing.T) {
	g := &gatedStore{Store: testutil.OpenStore(t, ""), held: make(chan struct{}, 4), release: make(chan bool, 4)}
	e := newEngine(t, g, engine.Options{})
	// Runs before the engine closes: fail whatever is still held.
	t.Cleanup(func() { close(g.release) })
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	mustRun(t, e, "t1", engine.RunRequest{})
	c := mustClaim(t, e, "echo")
	custom := func(name string) *tether.Event { return &tether.Event{Type: tether.EventCustom, Name: name} }
	send := func(ctx context.Context, seq int64, name string) (*engine.AppendResult, error) {
		return e.ProducerAppend(ctx, c.Run.ID, engine.Holder{Token: c.Lease.Token}, &engine.Producer{ID: "w1", Seq: seq}, []*tether.Event{custom(name)})
	}
	if _, err := send(ctx, 0, "first"); err != nil {
		t.Fatal(err)
	}

	g.mu.Lock()
	g.gated = true
	g.mu.Unlock()
	// The first try of seq 1 gives up while its commit is held.
	tctx, cancel := context.WithCancel(ctx)
	tried := make(chan error, 1)
	go func() { _, err := send(tctx, 1, "second"); tried <- err }()
	<-g.held
	cancel()
	if err := <-tried; !errors.Is(err, context.Canceled) {
		t.Fatalf("first try: %v, want it to give up", err)
	}
	// Its retry comes while the commit is still held.
	retried := make(chan *engine.AppendResult, 1)
	retryErr := make(chan error, 1)
	go func() {
		res, err := send(ctx, 1, "second")
		retryErr <- err
		retried <- res
	}()
	select {
	case err := <-retryErr:
		t.Fatalf("the retry answered (%+v, %v) before the first try's commit had an outcome", <-retried, err)
	case <-time.After(100 * time.Millisecond):
	}
	g.mu.Lock()
	g.gated = false
	g.mu.Unlock()
	g.release <- false // the first try's commit fails
	if err := <-retryErr; err != nil {
		// An error is honest (the client retries again); a duplicate is not.
		wantCode(t, err, tether.CodeUnavailable)
		if _, err := send(ctx, 1, "second"); err != nil {
			t.Fatal(err)
		}
	} else if res := <-retried; res.Duplicate {
		t.Fatalf("the retry was answered as a duplicate of a failed commit")
	}
	var names []string
	for _, ev := range readAll(t, g, "t1") {
		if ev.Type == tether.EventCustom {
			names = append(names, ev.Name)
		}
	}
	if strings.Join(names, ",") != "first,second" {
		t.Fatalf("the log's custom events: %v, want first,second", names)
	}
}
