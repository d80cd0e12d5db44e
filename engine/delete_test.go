package engine_test

import (
	"context"
	"io"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/hub"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// holdStore holds, at a gate, the store calls a test arms (a DeleteThread
// or a Commit before it runs, a LoadThread, Thread or ReadEvents after it
// read) until the test lets them go: it opens the window of a
// race deterministically. Everything else is the real store.
type holdStore struct {
	store.Store
	mu      sync.Mutex
	armed   map[string]bool
	entered chan string   // the name of a call now held
	release chan struct{} // lets one held call go
	stop    chan struct{} // closed when the test ends: lets every call go
}

func newHoldStore(t *testing.T) *holdStore {
	return &holdStore{Store: testutil.OpenStore(t, ""), armed: map[string]bool{},
		entered: make(chan string, 4), release: make(chan struct{}, 4), stop: make(chan struct{})}
}

// newHeldEngine starts an engine on h; when the test ends, h lets every
// held call go before the engine closes (which waits for them).
func newHeldEngine(t *testing.T, h *holdStore, opts engine.Options) *engine.Engine {
	e := newEngine(t, h, opts)
	t.Cleanup(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		select {
		case <-h.stop:
		default:
			close(h.stop)
		}
	})
	return e
}

// arm holds the next call of the named method.
func (h *holdStore) arm(name string) {
	h.mu.Lock()
	h.armed[name] = true
	h.mu.Unlock()
}

func (h *holdStore) gate(name string) {
	h.mu.Lock()
	held := h.armed[name]
	h.armed[name] = false
	h.mu.Unlock()
	if held {
		h.entered <- name
		select {
		case <-h.release:
		case <-h.stop:
		}
	}
}

// wait waits until the named call is held.
func (h *holdStore) wait(t *testing.T, name string) {
	t.Helper()
	select {
	case got := <-h.entered:
		if got != name {
			t.Fatalf("held %s, want %s", got, name)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s was never called", name)
	}
}

func (h *holdStore) DeleteThread(ctx context.Context, id string) error {
	h.gate("DeleteThread")
	return h.Store.DeleteThread(ctx, id)
}

func (h *holdStore) Commit(ctx context.Context, b *store.Batch) (*store.Result, error) {
	h.gate("Commit")
	return h.Store.Commit(ctx, b)
}

func (h *holdStore) LoadThread(ctx context.Context, id string, limit int) (*store.ThreadLoad, error) {
	ld, err := h.Store.LoadThread(ctx, id, limit)
	h.gate("LoadThread")
	return ld, err
}

func (h *holdStore) Thread(ctx context.Context, id string) (*store.ThreadRecord, error) {
	tr, err := h.Store.Thread(ctx, id)
	h.gate("Thread")
	return tr, err
}

func (h *holdStore) ReadEvents(ctx context.Context, id string, after tether.Offset, limit int) ([]*tether.Record, error) {
	recs, err := h.Store.ReadEvents(ctx, id, after, limit)
	if limit == 1 { // a subscription's cursor check
		h.gate("ReadEvents")
	}
	return recs, err
}

// deletable sets up a thread with a finished run and an active one, whose
// claim it returns: something to leak if a read resurrects the thread.
func deletable(t *testing.T, e *engine.Engine, id string) *engine.Claim {
	t.Helper()
	mustThread(t, e, id)
	mustRun(t, e, id, engine.RunRequest{Input: userInput("first secret")})
	c := mustClaim(t, e, "echo")
	mustAppend(t, e, c, append(answer("m1", "secret", "answer"), finished(tether.RunDone))...)
	mustRun(t, e, id, engine.RunRequest{Input: userInput("second secret")})
	c = mustClaim(t, e, "echo")
	mustAppend(t, e, c, &tether.Event{Type: tether.EventMessageStarted, MessageID: "m2", Role: tether.RoleAssistant})
	return c
}

// wantGone checks that every way to reach a deleted thread, or the run of
// c on it, answers not_found.
func wantGone(t *testing.T, e *engine.Engine, when, id string, c *engine.Claim) {
	t.Helper()
	ctx := ctxT(t)
	check := func(what string, err error) {
		t.Helper()
		if tether.CodeOf(err) != tether.CodeNotFound {
			t.Errorf("%s, %s: got %v, want not_found", when, what, err)
		}
	}
	snap, err := e.Thread(ctx, id)
	if err == nil {
		t.Errorf("%s, Thread: the deleted thread, with %d messages", when, len(snap.Messages))
	} else {
		check("Thread", err)
	}
	_, err = e.FinalAnswer(ctx, id, "")
	check("FinalAnswer", err)
	for _, req := range []engine.SubscribeRequest{{ThreadID: id}, {ThreadID: id, Cursor: tether.OffsetStart}, {RunID: c.Run.ID}} {
		sub, err := e.Subscribe(ctx, req)
		if err == nil {
			sub.Close()
		}
		check("Subscribe", err)
	}
	_, err = e.Run(ctx, c.Run.ID)
	check("Run", err)
	_, err = e.Append(ctx, c.Run.ID, c.Lease.Token, []*tether.Event{{Type: tether.EventTextDelta, MessageID: "m2", Delta: "late"}})
	check("Append", err)
	_, err = e.CreateRun(ctx, id, engine.RunRequest{Agent: "echo", Input: userInput("late")})
	check("CreateRun", err)
}

// wantFresh checks that a thread created again with a deleted one's ID
// shows nothing of it and takes new runs.
func wantFresh(t *testing.T, e *engine.Engine, id string, old *engine.Claim) {
	t.Helper()
	ctx := ctxT(t)
	if _, created, err := e.CreateThread(ctx, id, nil); err != nil || !created {
		t.Fatalf("create %s again: created %v, %v", id, created, err)
	}
	snap, err := e.Thread(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Runs) != 0 || len(snap.Messages) != 0 || snap.Offset != tether.OffsetStart {
		t.Errorf("created again: %d runs, %d messages, offset %s of the deleted thread", len(snap.Runs), len(snap.Messages), snap.Offset)
	}
	if _, err := e.CreateRun(ctx, id, engine.RunRequest{Agent: "echo", Input: userInput("new")}); err != nil {
		t.Errorf("a run on the thread created again: %v", err)
	}
	if _, err := e.Run(ctx, old.Run.ID); tether.CodeOf(err) != tether.CodeNotFound {
		t.Errorf("a run of the deleted thread, on the one created again: %v, want not_found", err)
	}
}

// A read while the store's delete is in flight must not load the thread
// again: it would stay cached, deleted, and be served after the delete
// returned, and to a thread created again with its ID.
func TestDeleteFencesReads(t *testing.T) {
	for _, cached := range []bool{true, false} {
		name := map[bool]string{true: "cached", false: "evicted"}[cached]
		t.Run(name, func(t *testing.T) {
			hs := newHoldStore(t)
			e := newHeldEngine(t, hs, engine.Options{MaxThreads: 1})
			c := deletable(t, e, "t1")
			if !cached {
				mustThread(t, e, "other")
				if _, err := e.Thread(ctxT(t), "other"); err != nil {
					t.Fatal(err)
				}
			}
			hs.arm("DeleteThread")
			done := make(chan error, 1)
			go func() { done <- e.DeleteThread(context.Background(), "t1") }()
			hs.wait(t, "DeleteThread")
			wantGone(t, e, "while the store deletes", "t1", c)
			hs.release <- struct{}{}
			if err := <-done; err != nil {
				t.Fatalf("delete: %v", err)
			}
			wantGone(t, e, "after the delete", "t1", c)
			wantFresh(t, e, "t1", c)
		})
	}
}

// A batch in flight when the delete starts is committed (it was accepted
// before), the delete waits for it, and nothing reaches the thread
// meanwhile.
func TestDeleteWaitsForCommitInFlight(t *testing.T) {
	hs := newHoldStore(t)
	e := newHeldEngine(t, hs, engine.Options{})
	c := deletable(t, e, "t1")
	hs.arm("Commit")
	appended := make(chan error, 1)
	go func() {
		_, err := e.Append(context.Background(), c.Run.ID, c.Lease.Token, []*tether.Event{{Type: tether.EventTextDelta, MessageID: "m2", Delta: "in flight"}})
		appended <- err
	}()
	hs.wait(t, "Commit")
	deleted := make(chan error, 1)
	go func() { deleted <- e.DeleteThread(context.Background(), "t1") }()
	testutil.Eventually(t, 10*time.Second, "the delete to start", func() bool {
		_, err := e.Thread(ctxT(t), "t1")
		return tether.CodeOf(err) == tether.CodeNotFound
	})
	wantGone(t, e, "while a commit is in flight", "t1", c)
	select {
	case err := <-deleted:
		t.Fatalf("the delete returned (%v) with a commit in flight", err)
	default:
	}
	hs.release <- struct{}{}
	if err := <-appended; err != nil {
		t.Fatalf("the append in flight: %v", err)
	}
	if err := <-deleted; err != nil {
		t.Fatalf("delete: %v", err)
	}
	wantGone(t, e, "after the delete", "t1", c)
	wantFresh(t, e, "t1", c)
}

// A load that read the thread before the delete and finishes after it
// must not put it in memory: its callers get not_found.
func TestDeleteDropsLoadInFlight(t *testing.T) {
	hs := newHoldStore(t)
	e1 := newHeldEngine(t, hs, engine.Options{})
	c := deletable(t, e1, "t1")
	e1.Close()
	e := newHeldEngine(t, hs, engine.Options{}) // t1 is not in memory
	hs.arm("LoadThread")
	loaded := make(chan error, 1)
	go func() {
		_, err := e.Thread(context.Background(), "t1")
		loaded <- err
	}()
	hs.wait(t, "LoadThread") // it has read the thread
	if err := e.DeleteThread(ctxT(t), "t1"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	hs.release <- struct{}{}
	if err := <-loaded; tether.CodeOf(err) != tether.CodeNotFound {
		t.Errorf("the load that read the thread before its delete: %v, want not_found", err)
	}
	wantGone(t, e, "after the delete", "t1", c)
	if n := e.CachedThreads(); n != 0 {
		t.Errorf("%d threads in memory after the delete", n)
	}
	wantFresh(t, e, "t1", c)
}

// A subscription that found the thread before its delete, and registers
// with the fan-out after the delete closed the thread's subscribers, must
// not stay open: it would get the events of a thread created again with
// the ID after the deleted thread's snapshot.
func TestDeleteEndsSubscriptionSetUpAcross(t *testing.T) {
	hs := newHoldStore(t)
	e := newHeldEngine(t, hs, engine.Options{})
	c := deletable(t, e, "t1")
	snap, err := e.Thread(ctxT(t), "t1")
	if err != nil {
		t.Fatal(err)
	}
	hs.arm("ReadEvents")
	subbed := make(chan *engine.Subscription, 1)
	go func() {
		sub, err := e.Subscribe(context.Background(), engine.SubscribeRequest{ThreadID: "t1", Cursor: snap.Offset})
		if err != nil {
			if tether.CodeOf(err) != tether.CodeNotFound {
				t.Errorf("subscribe: %v, want not_found or a subscription that ends", err)
			}
			sub = nil
		}
		subbed <- sub
	}()
	hs.wait(t, "ReadEvents") // its cursor is checked
	if err := e.DeleteThread(ctxT(t), "t1"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	hs.release <- struct{}{}
	sub := <-subbed
	wantFresh(t, e, "t1", c) // appends run.created and a message to the new thread
	if sub == nil {
		return
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	recs, err := sub.Next(ctx)
	if err != hub.ErrClosed && err != io.EOF {
		t.Errorf("a subscription to the deleted thread got %d records of the new one (%v), want it closed", len(recs), err)
	}
}

// A load that read "no such thread" before the thread was created must
// not answer a caller that came after the create and joined it.
// It runs in a synctest bubble so that the test knows when the run's
// request waits for the load, rather than sleep and hope it does.
func TestLoadJoinedAfterCreate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hs := newHoldStore(t)
		e := newHeldEngine(t, hs, engine.Options{})
		hs.arm("LoadThread")
		first := make(chan error, 1)
		go func() {
			_, err := e.Thread(context.Background(), "t1")
			first <- err
		}()
		hs.wait(t, "LoadThread") // it read: no such thread
		mustThread(t, e, "t1")
		second := make(chan error, 1)
		go func() {
			_, err := e.CreateRun(context.Background(), "t1", engine.RunRequest{Agent: "echo", Input: userInput("hi")})
			second <- err
		}()
		// The run's request finds the load in flight and waits for it.
		synctest.Wait()
		if len(second) != 0 {
			t.Fatalf("the run's request answered (%v) while the load it joined was held", <-second)
		}
		hs.release <- struct{}{}
		if err := <-first; tether.CodeOf(err) != tether.CodeNotFound {
			t.Errorf("the load that read before the create: %v, want not_found", err)
		}
		if err := <-second; err != nil {
			t.Errorf("a run created after its thread: %v", err)
		}
	})
}

// Another node deletes a thread while this node loads it: the load read
// the thread before the delete, the notification of the delete comes
// before the load ends. The load must not keep what it read.
func TestDeletedElsewhereDuringLoad(t *testing.T) {
	base := testutil.OpenStore(t, "")
	sh := newShared(base)
	a := newEngine(t, nodeView{sh, 0}, engine.Options{NodeID: "a"})
	c := deletable(t, a, "t1")
	last := readAll(t, base, "t1")
	// b starts after: it has not loaded the thread.
	hs := &holdStore{Store: nodeView{sh, 1}, armed: map[string]bool{},
		entered: make(chan string, 4), release: make(chan struct{}, 4), stop: make(chan struct{})}
	b := newHeldEngine(t, hs, engine.Options{NodeID: "b"})
	hs.arm("LoadThread")
	loaded := make(chan error, 1)
	go func() {
		_, err := b.Thread(context.Background(), "t1")
		loaded <- err
	}()
	hs.wait(t, "LoadThread")
	if err := a.DeleteThread(ctxT(t), "t1"); err != nil {
		t.Fatal(err)
	}
	// What a store shared by several nodes tells the others.
	sh.mu.Lock()
	notifyB := sh.fns[1]
	sh.mu.Unlock()
	notifyB(&store.Committed{ThreadID: "t1", Before: last[len(last)-1].Offset, Deleted: true})
	hs.release <- struct{}{}
	if err := <-loaded; tether.CodeOf(err) != tether.CodeNotFound {
		t.Errorf("a load that read the thread before another node deleted it: %v, want not_found", err)
	}
	wantGone(t, b, "on the other node", "t1", c)
	if n := b.CachedThreads(); n != 0 {
		t.Errorf("%d threads in memory on the other node", n)
	}
}

// A create of a thread whose delete is in flight is a create of a thread
// that does not exist: it waits for the delete and creates the thread
// anew. It must not answer with the thread being deleted (created false),
// which is gone the moment after. In a synctest bubble, so that the test
// knows the create is waiting rather than give it a second to go on.
func TestCreateDuringDeleteCreatesAnew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hs := newHoldStore(t)
		e := newHeldEngine(t, hs, engine.Options{})
		c := deletable(t, e, "t1")
		hs.arm("DeleteThread")
		deleted := make(chan error, 1)
		go func() { deleted <- e.DeleteThread(context.Background(), "t1") }()
		hs.wait(t, "DeleteThread")

		type result struct {
			created bool
			err     error
		}
		// Answering with the deleted thread reads its row (Thread).
		hs.arm("Thread")
		created := make(chan result, 1)
		go func() {
			_, ok, err := e.CreateThread(context.Background(), "t1", nil)
			created <- result{ok, err}
		}()
		synctest.Wait() // the create waits for the delete, or went on
		select {
		case <-hs.entered:
			t.Fatal("the create read the row of the thread being deleted")
		case r := <-created:
			t.Fatalf("the create answered (created %v, %v) while the delete was in flight", r.created, r.err)
		default:
		}
		hs.release <- struct{}{}
		if err := <-deleted; err != nil {
			t.Fatalf("delete: %v", err)
		}
		if r := <-created; r.err != nil || !r.created {
			t.Fatalf("create after the delete: created %v, %v; want created", r.created, r.err)
		}
		snap, err := e.Thread(ctxT(t), "t1")
		if err != nil || len(snap.Runs) != 0 {
			t.Fatalf("the thread created again: %v, %v", snap, err)
		}
		if _, err := e.Run(ctxT(t), c.Run.ID); tether.CodeOf(err) != tether.CodeNotFound {
			t.Fatalf("a run of the deleted thread: %v", err)
		}
	})
}
