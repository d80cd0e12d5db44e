package engine

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/runs"
	"github.com/tetherhq/tether/store"
)

// thread is the in-memory state of one thread: the speculative machine that
// validates appends (write side) and the committed state that readers see
// (read side). The two sides have separate locks so that the store's
// notify path, which takes only rmu, never waits behind a writer.
type thread struct {
	id    string
	ready chan struct{} // closed once loaded
	err   error         // load error, set before ready is closed
	elem  *list.Element // in Engine.lru, guarded by Engine.mu

	wmu       sync.Mutex
	idle      *sync.Cond // signalled when the queue drains
	spec      *runs.Machine
	version   int64 // events committed, in flight and queued
	committed int64 // events committed
	row       tether.Thread
	extras    map[string]*runExtra
	idem      map[string]string          // idempotency key → run ID
	producers map[string]*store.Producer // producer key → state, committed and queued
	gen       int64                      // bumped by each rebuild of the speculative state
	// prodPending maps a producer key to the plan that set its state in
	// producers, so that a retry of an append whose commit is still in
	// flight waits for it before it counts as a duplicate.
	prodPending map[string]*pending
	// idemPending maps an idempotency key to the plan that created its
	// run, while that plan's commit is in flight: a retry of the creation
	// waits for it rather than hand out a run that may never exist.
	idemPending map[string]*pending
	queue       []*pending
	flushing    bool
	broken      bool // a commit failed: this entry must not be used again
	deleted     bool

	rmu    sync.Mutex
	state  *runs.State // nil while loading
	folded int64       // events folded into state
	// early holds the batches notified while the thread was loading:
	// another node may commit during the load, after the load's read.
	early []*store.Committed
}

// runExtra is what the server keeps about a run besides the fold of the
// log: how it was created and who holds it.
type runExtra struct {
	key       string
	multitask tether.Multitask
	lease     store.Lease
	saved     store.RunRecord // the row as last written, to skip rewrites that change nothing
}

func (t *thread) loaded() bool {
	select {
	case <-t.ready:
		return t.err == nil
	default:
		return false
	}
}

// waitIdle waits until the thread has nothing queued or in flight.
func (t *thread) waitIdle() {
	if !t.loaded() {
		return
	}
	t.wmu.Lock()
	for t.flushing {
		t.idle.Wait()
	}
	t.wmu.Unlock()
}

// thread returns the loaded state of a thread, loading it from the store if
// needed. It returns a not_found error if the thread does not exist, or if
// id is not a valid thread ID: the store also keeps logs the engine must
// never load, under IDs with a ":" (Durable Streams keeps its streams under
// "ds:"), which tether.ValidID refuses.
func (e *Engine) thread(ctx context.Context, id string) (*thread, error) {
	if !tether.ValidID(id) {
		return nil, tether.Errorf(tether.CodeNotFound, "thread %s not found", truncateID(id))
	}
	e.mu.Lock()
	t := e.threads[id]
	if t != nil {
		e.lru.MoveToFront(t.elem)
		e.mu.Unlock()
		select {
		case <-t.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if t.err != nil {
			return nil, t.err
		}
		return t, nil
	}
	t = &thread{id: id, ready: make(chan struct{})}
	t.idle = sync.NewCond(&t.wmu)
	t.elem = e.lru.PushFront(t)
	e.threads[id] = t
	e.mu.Unlock()

	// The load must not fail because the first caller gave up: others may
	// be waiting for it.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	t.err = e.load(lctx, t)
	cancel()
	close(t.ready)
	if t.err != nil {
		e.forget(t)
		return nil, t.err
	}
	e.evict()
	return t, nil
}

// cached returns the loaded state of a thread if it is in memory.
func (e *Engine) cached(id string) *thread {
	e.mu.Lock()
	t := e.threads[id]
	e.mu.Unlock()
	if t == nil || !t.loaded() {
		return nil
	}
	return t
}

// entry returns a thread's entry, loaded or loading, if there is one.
func (e *Engine) entry(id string) *thread {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.threads[id]
}

// forget drops a thread's state from memory.
func (e *Engine) forget(t *thread) {
	e.mu.Lock()
	if e.threads[t.id] == t {
		delete(e.threads, t.id)
		e.lru.Remove(t.elem)
	}
	e.mu.Unlock()
}

// forgetRuns drops the runs of a deleted thread from the run → thread
// index (those the index still gives to that thread).
func (e *Engine) forgetRuns(threadID string, runIDs []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range runIDs {
		if e.runs[id] == threadID {
			delete(e.runs, id)
		}
	}
}

// evict drops the least recently used idle threads beyond MaxThreads.
func (e *Engine) evict() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for el := e.lru.Back(); el != nil && len(e.threads) > e.opts.MaxThreads; {
		t := el.Value.(*thread)
		prev := el.Prev()
		if t.loaded() && t.wmu.TryLock() {
			if !t.flushing && len(t.queue) == 0 {
				delete(e.threads, t.id)
				e.lru.Remove(el)
			}
			t.wmu.Unlock()
		}
		el = prev
	}
}

// load folds a thread's log into its committed state and derives the
// speculative machine from it.
func (e *Engine) load(ctx context.Context, t *thread) error {
	rec, err := e.st.Thread(ctx, t.id)
	if err != nil {
		return e.storeErr(err, "thread %s", t.id)
	}
	row := rec.Thread
	state := runs.NewState(tether.Thread{ID: row.ID, Metadata: row.Metadata, CreatedAt: row.CreatedAt})
	after := tether.OffsetStart
	var n int64
	for {
		recs, err := e.st.ReadEvents(ctx, t.id, after, 1000)
		if err != nil {
			return e.storeErr(err, "thread %s", t.id)
		}
		for _, r := range recs {
			ev, err := r.Decode()
			if err != nil {
				return fmt.Errorf("load thread %s: decode event %s: %w", t.id, r.Offset, err)
			}
			if err := state.Apply(ev); err != nil {
				// A committed event that the machine rejects means the rules
				// changed under an old log. Keep serving what can be folded.
				e.log.Warn("event of the log does not fold", "thread", t.id, "offset", r.Offset, "err", err)
			}
			after = r.Offset
			n++
		}
		if len(recs) < 1000 {
			break
		}
	}
	// Batches committed (by another node) while the log was read were
	// kept aside by the notify path: fold them too, skipping what the read
	// already had. The version is what was folded; a commit on a stale one
	// conflicts and is replayed.
	t.rmu.Lock()
	t.state = state
	t.folded = n
	for _, c := range t.early {
		for _, ev := range c.Events {
			e.fold(t, ev)
		}
	}
	t.early = nil
	n = t.folded
	t.spec = state.Machine().Clone()
	t.rmu.Unlock()
	t.version, t.committed = n, n
	t.row = tether.Thread{ID: row.ID, Metadata: row.Metadata, CreatedAt: row.CreatedAt}
	t.extras = make(map[string]*runExtra)
	t.idem = make(map[string]string)
	t.producers = make(map[string]*store.Producer)
	t.prodPending = make(map[string]*pending)
	for _, r := range t.spec.Runs() {
		if r.Status.Terminal() {
			continue
		}
		rr, err := e.runRecord(ctx, t.id, r.ID)
		if err != nil {
			return e.storeErr(err, "run %s", r.ID)
		}
		t.extras[r.ID] = &runExtra{key: rr.IdempotencyKey, multitask: rr.Multitask, lease: rr.Lease, saved: *rr}
		if rr.IdempotencyKey != "" {
			t.idem[rr.IdempotencyKey] = r.ID
		}
	}
	e.mu.Lock()
	for _, r := range t.spec.Runs() {
		e.runs[r.ID] = t.id
	}
	e.mu.Unlock()
	return nil
}

// runRecord reads the row of a run of a thread, as of the thread's log on
// a store whose rows may trail it (another node's batch, notified here
// before that node wrote its rows).
func (e *Engine) runRecord(ctx context.Context, threadID, runID string) (*store.RunRecord, error) {
	if r, ok := e.st.(store.ThreadRunReader); ok {
		return r.ThreadRun(ctx, threadID, runID)
	}
	return e.st.Run(ctx, runID)
}

// threadOfRun returns the thread a run belongs to.
func (e *Engine) threadOfRun(ctx context.Context, runID string) (*thread, error) {
	e.mu.Lock()
	tid, ok := e.runs[runID]
	e.mu.Unlock()
	if !ok {
		rr, err := e.st.Run(ctx, runID)
		if err != nil {
			return nil, e.storeErr(err, "run %s", runID)
		}
		tid = rr.Run.ThreadID
	}
	t, err := e.thread(ctx, tid)
	if errors.Is(err, tether.ErrNotFound) {
		return nil, tether.Errorf(tether.CodeNotFound, "run %s not found", runID)
	}
	return t, err
}

// snapshotState returns a read-only copy of a thread's committed state.
func (t *thread) snapshotState() *runs.State {
	t.rmu.Lock()
	defer t.rmu.Unlock()
	return t.state.Clone()
}

// truncateID keeps error messages short whatever a client sent as an ID.
func truncateID(id string) string {
	if len(id) > 140 {
		return id[:140] + "…"
	}
	return id
}
