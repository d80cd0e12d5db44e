package engine

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
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
	// indexed are the runs this entry put in Engine.runs, guarded by
	// Engine.mu: they leave the index with the entry.
	indexed []string
	// retired is set, under Engine.mu, when the entry leaves
	// Engine.threads (deleted, evicted, dropped after a failed commit or
	// another node's delete): whoever still holds it must start nothing
	// new on it, but look the thread up again.
	retired atomic.Bool

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
	// recentPlans is the largest number of plans of a recent batch,
	// decaying by an eighth per batch (see gather).
	recentPlans int
	broken      bool // a commit failed: this entry must not be used again
	deleted     bool

	rmu    sync.Mutex
	state  *runs.State // nil while loading
	folded int64       // events folded into state
	// Checkpoints (checkpoint.go): the events the latest checkpoint folds,
	// its size, the log bytes folded since, and whether one is queued or
	// being written.
	ckptFolded int64
	ckptSize   int
	sinceBytes int
	ckptBusy   bool
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
// needed. It returns a not_found error if the thread does not exist, is
// being deleted, or if id is not a valid thread ID: the store also keeps
// logs the engine must never load, under IDs with a ":" (Durable Streams
// keeps its streams under "ds:"), which tether.ValidID refuses.
func (e *Engine) thread(ctx context.Context, id string) (*thread, error) {
	if !tether.ValidID(id) {
		return nil, notFound(id)
	}
	for attempt := 0; ; attempt++ {
		t, loader, err := e.entryFor(id)
		if err != nil {
			return nil, err
		}
		if loader {
			e.loadEntry(ctx, t)
		}
		select {
		case <-t.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if t.err == nil && !t.retired.Load() {
			return t, nil
		}
		if t.err != nil && t.err != errRetired && (loader || tether.CodeOf(t.err) != tether.CodeNotFound || attempt > 0) {
			return nil, t.err
		}
		// A load this caller joined may have read the store before the
		// caller came: the thread may have been created since (a create
		// notifies nothing). Its not_found is not the caller's answer:
		// look again once, which starts a load after the caller came.
		// Or the entry was dropped while loading or just after: deleted
		// (here or by another node), or evicted. Look it up again.
		if attempt >= maxLookups {
			return nil, tether.Errorf(tether.CodeUnavailable, "thread %s keeps being dropped from memory; retry", clip.ID(id))
		}
	}
}

// maxLookups bounds how often thread looks a thread up again after its
// entry was dropped under it.
const maxLookups = 4

// errRetired is the load error of an entry dropped while it loaded.
var errRetired = errors.New("engine: the thread's entry was dropped while it loaded")

func notFound(id string) error {
	return tether.Errorf(tether.CodeNotFound, "thread %s not found", clip.ID(id))
}

// entryFor returns the entry of a thread, creating it if there is none; the
// caller that created it (loader) must load it. While a delete of the
// thread is in flight no entry is made: the thread is not_found.
func (e *Engine) entryFor(id string) (t *thread, loader bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.deleting[id] > 0 {
		return nil, false, notFound(id)
	}
	if t = e.threads[id]; t != nil {
		e.lru.MoveToFront(t.elem)
		return t, false, nil
	}
	t = &thread{id: id, ready: make(chan struct{})}
	t.idle = sync.NewCond(&t.wmu)
	t.elem = e.lru.PushFront(t)
	e.threads[id] = t
	return t, true, nil
}

// loadEntry loads a new entry and publishes it: its runs go in the run
// index, and its waiters get it, only if it is still the thread's entry
// once loaded. A delete that started meanwhile (or another node's)
// dropped it; what it read may be of the deleted thread.
func (e *Engine) loadEntry(ctx context.Context, t *thread) {
	// The load must not fail because the first caller gave up: others may
	// be waiting for it.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	err := e.load(lctx, t)
	cancel()
	e.mu.Lock()
	if err == nil && e.threads[t.id] != t {
		err = errRetired
	}
	if err == nil {
		for _, r := range t.spec.Runs() {
			e.index(t, r.ID)
		}
	} else {
		e.drop(t)
	}
	t.err = err
	e.mu.Unlock()
	close(t.ready)
	if err == nil {
		t.rmu.Lock()
		e.noteFolded(t, 0) // a long log folded after the checkpoint: save one now
		t.rmu.Unlock()
		e.evict()
	}
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
	e.drop(t)
	e.mu.Unlock()
}

// drop removes t from the threads in memory, and its runs from the run
// index, and retires it. e.mu is held.
func (e *Engine) drop(t *thread) {
	if e.threads[t.id] == t {
		delete(e.threads, t.id)
		e.lru.Remove(t.elem)
	}
	for _, id := range t.indexed {
		if e.runs[id] == t.id {
			delete(e.runs, id)
		}
	}
	t.indexed = nil
	t.retired.Store(true)
}

// index records that a run is of the thread of entry t, while t is the
// thread's entry in memory: the index covers the threads in memory only
// (a run of another is found through the store). e.mu is held.
func (e *Engine) index(t *thread, runID string) {
	if e.threads[t.id] != t {
		return
	}
	e.runs[runID] = t.id
	t.indexed = append(t.indexed, runID)
}

// evict drops the least recently used idle threads beyond MaxThreads.
func (e *Engine) evict() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dropIdle(func() bool { return len(e.threads) > e.opts.MaxThreads }, nil)
}

// dropIdle drops, least recently used first and while more (if set) holds,
// the loaded threads with nothing being written for which also (if set)
// holds, and returns how many. e.mu is held.
func (e *Engine) dropIdle(more func() bool, also func(*thread) bool) int {
	n := 0
	for el := e.lru.Back(); el != nil && (more == nil || more()); {
		t := el.Value.(*thread)
		prev := el.Prev()
		if t.loaded() && t.wmu.TryLock() {
			if !t.flushing && len(t.queue) == 0 && (also == nil || also(t)) {
				e.drop(t)
				n++
			}
			t.wmu.Unlock()
		}
		el = prev
	}
	return n
}

// DropIdle drops from memory the state of every thread that has no run
// in progress and nothing being written, and returns how many. It is for a
// server gone quiet after a burst (as Hub.DropIdle): those states were
// allocated among the burst's garbage and pin much of the heap it grew to;
// a thread used again is loaded again, from its checkpoint and the log
// after it, as after an eviction.
func (e *Engine) DropIdle() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.dropIdle(nil, func(t *thread) bool { return t.spec.ActiveRunID() == "" })
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
			return nil, e.storeErr(err, "run %s", clip.ID(runID))
		}
		tid = rr.Run.ThreadID
	}
	t, err := e.thread(ctx, tid)
	if errors.Is(err, tether.ErrNotFound) {
		return nil, tether.Errorf(tether.CodeNotFound, "run %s not found", clip.ID(runID))
	}
	return t, err
}

// snapshotState returns a read-only copy of a thread's committed state.
func (t *thread) snapshotState() *runs.State {
	t.rmu.Lock()
	defer t.rmu.Unlock()
	return t.state.Clone()
}
