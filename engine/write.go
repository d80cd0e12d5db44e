package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/runs"
	"github.com/tetherhq/tether/store"
)

// A planner is what a plan sees: the speculative state of one thread inside
// a transaction, and the means to emit events and change run rows. A plan
// runs under the thread's write lock and must not block or do I/O.
type planner struct {
	e         *Engine
	t         *thread
	tx        *runs.Tx
	now       tether.Time
	events    []*tether.Event
	leases    map[string]store.Lease // run ID → new lease
	extras    map[string]*runExtra   // runs created by this plan
	idem      map[string]string
	producers []store.Producer
	checks    []store.LeaseCheck
	result    any // what the plan hands back to its caller
}

// run returns a run as the transaction sees it.
func (p *planner) run(id string) (tether.Run, bool) { return p.tx.Run(id) }

// emit validates ev against the state (including earlier events of this
// plan) and adds it. The server sets ts.
func (p *planner) emit(ev *tether.Event) error {
	ev.TS = p.now
	if err := p.tx.Apply(ev); err != nil {
		return eventErr(len(p.events), ev, err)
	}
	p.events = append(p.events, ev)
	return nil
}

func eventErr(i int, ev *tether.Event, err error) error {
	var te *tether.Error
	if errors.As(err, &te) {
		return tether.Errorf(te.Code, "event %d (%s): %s", i, ev.Type, te.Message)
	}
	return err
}

// setLease gives a run a new lease.
func (p *planner) setLease(runID string, l store.Lease) {
	if p.leases == nil {
		p.leases = make(map[string]store.Lease)
	}
	p.leases[runID] = l
}

// actsOnLease makes the plan's batch conditional on the run's lease in
// the store being l (store.Batch.Leases): a plan that decides on a lease
// (it expired) must lose to a renewal another node committed, which writes
// no event and so may not be in this node's copy of the lease.
func (p *planner) actsOnLease(runID string, l store.Lease) {
	p.checks = append(p.checks, store.LeaseCheck{RunID: runID, Token: l.Token, ExpiresAt: l.ExpiresAt})
}

// lease returns the current lease of a run.
func (p *planner) lease(runID string) store.Lease {
	if l, ok := p.leases[runID]; ok {
		return l
	}
	if x := p.t.extras[runID]; x != nil {
		return x.lease
	}
	return store.Lease{}
}

// pending is a validated plan waiting for its commit. It keeps its plan so
// that it can be validated again on a fresher state if the store refuses
// the batch because another node wrote first.
type pending struct {
	plan      func(*planner) error
	result    any
	events    []*tether.Event
	encoded   [][]byte
	runs      []*store.RunRecord
	producers []store.Producer
	checks    []store.LeaseCheck
	idemKeys  []string // idempotency keys of the runs the plan creates
	done      chan outcome
	// settled is closed once the plan's fate is known: committed, failed,
	// or replaced by a new pending after a replay.
	settled chan struct{}
}

// finish delivers the plan's outcome and marks it settled.
func (pd *pending) finish(o outcome) {
	pd.done <- o
	close(pd.settled)
}

// isSettled reports whether the plan's fate is known.
func (pd *pending) isSettled() bool {
	select {
	case <-pd.settled:
		return true
	default:
		return false
	}
}

// outcome is what a committed plan returns to its caller.
type outcome struct {
	records []*tether.Record
	before  tether.Offset
	result  any
	err     error
}

// update runs plan against the thread's speculative state and, if it emits
// events or changes rows, commits them. It returns once they are committed
// and published, with the records and whatever the plan set as its result.
func (e *Engine) update(ctx context.Context, t *thread, plan func(*planner) error) (*outcome, error) {
	if e.closed.Load() {
		return nil, errClosed
	}
	pd, result, err := e.accept(t, plan)
	if err == errForeign {
		// Another node committed to the thread since this one last did:
		// validate on a state that includes it.
		if err := e.resync(ctx, t); err != nil {
			return nil, err
		}
		pd, result, err = e.accept(t, plan)
	}
	if err != nil && staleMayExplain(err) {
		// This node may not have seen another node's latest events (a
		// lease granted there, a run created there): reject only on a
		// state that is up to date with the store. A lease renewed there
		// writes no event, so the version cannot tell: a lease refused
		// is always looked up again.
		behind := tether.CodeOf(err) == tether.CodeLeaseLost
		if !behind {
			var berr error
			if behind, berr = e.behind(ctx, t); berr != nil {
				// The store cannot say whether this node is behind, so
				// the refusal may be stale: answer with the store's
				// error, which the client retries.
				return nil, berr
			}
		}
		if behind {
			if err := e.resync(ctx, t); err != nil {
				return nil, err
			}
			pd, result, err = e.accept(t, plan)
		}
	}
	if err != nil {
		return nil, err
	}
	if pd == nil { // nothing to write
		return &outcome{result: result, before: tether.OffsetStart}, nil
	}
	select {
	case o := <-pd.done:
		if o.err != nil {
			return nil, o.err
		}
		return &o, nil
	case <-ctx.Done():
		// The batch is queued and will be committed; the caller gave up
		// waiting, which is the usual ambiguity of a write that times out.
		return nil, ctx.Err()
	}
}

// accept validates plan on the thread's speculative state and queues what
// it writes. It returns no pending when there is nothing to write.
func (e *Engine) accept(t *thread, plan func(*planner) error) (*pending, any, error) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if t.deleted {
		return nil, nil, tether.Errorf(tether.CodeNotFound, "thread %s not found", t.id)
	}
	if t.broken || t.retired.Load() {
		// Dropped from memory since the caller looked it up: a plan
		// validated on it could land on a thread deleted and created
		// again since.
		return nil, nil, tether.Errorf(tether.CodeUnavailable, "thread %s is being reloaded; retry", t.id)
	}
	if !t.flushing && len(t.queue) == 0 && t.foldedCount() != t.committed {
		return nil, nil, errForeign
	}
	pd, result, err := e.plan(t, plan)
	if err != nil || pd == nil {
		return nil, result, err
	}
	t.queue = append(t.queue, pd)
	if !t.flushing {
		t.flushing = true
		go e.flush(t)
	}
	return pd, nil, nil
}

// plan runs a plan in a transaction of the speculative machine and, if it
// holds, prepares it. t.wmu must be held.
func (e *Engine) plan(t *thread, plan func(*planner) error) (*pending, any, error) {
	p := &planner{e: e, t: t, tx: t.spec.Begin(), now: e.now()}
	if err := plan(p); err != nil {
		e.counters.Rejected.Add(1)
		return nil, nil, err
	}
	pd, err := e.prepare(p)
	if err != nil {
		e.counters.Rejected.Add(1)
		return nil, nil, err
	}
	if pd == nil {
		return nil, p.result, nil
	}
	pd.plan, pd.result = plan, p.result
	return pd, nil, nil
}

// errForeign says the thread's committed state holds events this engine
// did not write, which its speculative state and leases do not reflect.
var errForeign = errors.New("engine: the thread has events of another node")

// staleMayExplain reports whether a rejection could be due to this node
// not having seen events another node committed.
func staleMayExplain(err error) bool {
	switch tether.CodeOf(err) {
	case tether.CodeNotFound, tether.CodeConflict, tether.CodeLeaseLost, tether.CodeBadRequest, tether.CodeRunActive:
		return true
	}
	return false
}

// prepare encodes a plan's events, computes the rows it changes and commits
// its transaction to the speculative machine. It returns nil if there is
// nothing to write.
func (e *Engine) prepare(p *planner) (*pending, error) {
	t := p.t
	pd := &pending{events: p.events, done: make(chan outcome, 1), settled: make(chan struct{})}
	pd.encoded = make([][]byte, len(p.events))
	for i, ev := range p.events {
		b, err := ev.Encode()
		if err != nil {
			return nil, tether.Wrap(err, tether.CodeBadRequest, fmt.Sprintf("event %d (%s) cannot be encoded", i, ev.Type))
		}
		if len(b) > e.opts.MaxEventBytes {
			return nil, tether.Errorf(tether.CodeTooLarge, "event %d (%s) is %d bytes; the limit is %d", i, ev.Type, len(b), e.opts.MaxEventBytes)
		}
		pd.encoded[i] = b
	}

	// Rows: every run whose status or lease changed.
	changed := p.tx.Changed()
	var seen map[string]bool
	if len(changed)+len(p.leases) > 0 {
		seen = make(map[string]bool)
	}
	var ids []string
	for _, r := range changed {
		if !seen[r.ID] {
			seen[r.ID] = true
			ids = append(ids, r.ID)
		}
	}
	for id := range p.leases {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		run, ok := p.tx.Run(id)
		if !ok {
			continue
		}
		x := t.extras[id]
		if x == nil {
			x = p.extras[id]
		}
		if x == nil {
			x = &runExtra{}
		}
		rec := store.RunRecord{Run: run, IdempotencyKey: x.key, Multitask: x.multitask, Lease: p.lease(id)}
		if rowEqual(&rec, &x.saved) {
			continue
		}
		pd.runs = append(pd.runs, &rec)
	}
	pd.producers, pd.checks = p.producers, p.checks
	if len(pd.events) == 0 && len(pd.runs) == 0 && len(pd.producers) == 0 {
		return nil, nil
	}

	// The plan is accepted: make it part of the speculative state.
	p.tx.Commit()
	t.version += int64(len(p.events))
	for id, x := range p.extras {
		t.extras[id] = x
	}
	for k, id := range p.idem {
		t.idem[k] = id
		if t.idemPending == nil {
			t.idemPending = make(map[string]*pending)
		}
		t.idemPending[k] = pd
		pd.idemKeys = append(pd.idemKeys, k)
	}
	for i := range p.producers {
		t.producers[p.producers[i].Key] = &p.producers[i]
		t.prodPending[p.producers[i].Key] = pd
	}
	for _, rec := range pd.runs {
		x := t.extras[rec.Run.ID]
		if x == nil {
			x = &runExtra{}
			t.extras[rec.Run.ID] = x
		}
		x.lease = rec.Lease
		x.saved = *rec
		if rec.Run.Status.Terminal() {
			// A finished run never changes again; keep only what
			// idempotent retries of its creation need.
			delete(t.extras, rec.Run.ID)
		}
	}
	e.mu.Lock()
	for id := range p.extras {
		e.index(t, id)
	}
	e.mu.Unlock()
	e.counters.Appends.Add(1)
	return pd, nil
}

// rowEqual reports whether two run rows are the same but for the run's
// LastUpdateAt, which readers take from the log, not the row.
func rowEqual(a, b *store.RunRecord) bool {
	if a.IdempotencyKey != b.IdempotencyKey || a.Multitask != b.Multitask || a.Lease != b.Lease {
		return false
	}
	x, y := a.Run, b.Run
	if x.ID != y.ID || x.Status != y.Status || x.Attempt != y.Attempt || x.WorkerID != y.WorkerID ||
		!x.StartedAt.Equal(y.StartedAt.Time) || !x.CompletedAt.Equal(y.CompletedAt.Time) ||
		!x.CancelRequestedAt.Equal(y.CancelRequestedAt.Time) || (x.Request == nil) != (y.Request == nil) ||
		(x.Error == nil) != (y.Error == nil) {
		return false
	}
	if x.Request != nil && x.Request.ID != y.Request.ID {
		return false
	}
	return true
}

// flush commits a thread's queued plans, one batch at a time, until the
// queue is empty. Plans that arrive while a batch is in flight are combined
// into the next batch.
func (e *Engine) flush(t *thread) {
	conflicts := 0
	maxTake := 0 // plans per batch, once the store refused a batch as too large; 0: all
	for {
		t.wmu.Lock()
		if t.recentPlans > 1 {
			gather(t)
		}
		batch := t.queue
		t.queue = nil
		if maxTake > 0 && len(batch) > maxTake {
			t.queue = append([]*pending(nil), batch[maxTake:]...)
			batch = batch[:maxTake:maxTake]
		}
		if len(batch) == 0 {
			t.flushing = false
			t.idle.Broadcast()
			t.wmu.Unlock()
			return
		}
		t.recentPlans = max(len(batch), t.recentPlans-(t.recentPlans+7)/8)
		b := &store.Batch{ThreadID: t.id, Version: t.committed}
		if len(batch) == 1 {
			// The usual case of one producer per thread: the batch is
			// the plan's, which the store only reads.
			pd := batch[0]
			b.Events, b.Encoded, b.Producers, b.Leases, b.Runs = pd.events, pd.encoded, pd.producers, pd.checks, pd.runs
		} else {
			combine(b, batch)
		}
		if len(b.Events) > 0 {
			row := t.row
			row.Status = t.spec.ThreadStatus()
			row.ActiveRunID = t.spec.ActiveRunID()
			row.UpdatedAt = b.Events[len(b.Events)-1].TS
			b.Thread = &row
		}
		t.wmu.Unlock()

		res, err := e.st.Commit(context.Background(), b)
		if errors.Is(err, store.ErrConflict) && conflicts < maxConflicts {
			// Another node wrote to the thread first: catch up with the
			// store and validate every queued plan again on that state.
			conflicts++
			// Two nodes that keep writing to one thread would keep
			// colliding; a random pause lets one of them through.
			time.Sleep(rand.N(time.Duration(min(1<<conflicts, 64)) * time.Millisecond))
			if e.replay(t, batch) {
				continue
			}
			return
		}
		if errors.Is(err, store.ErrTooLarge) {
			// Nothing was written. Plans combined into one batch are
			// committed in smaller ones, in order; a plan too large on
			// its own is refused, and what was validated after it is
			// validated again without it.
			if len(batch) > 1 {
				maxTake = len(batch) / 2
				t.wmu.Lock()
				t.queue = append(batch, t.queue...)
				t.wmu.Unlock()
				continue
			}
			batch[0].finish(outcome{err: tether.Errorf(tether.CodeTooLarge,
				"the append is larger than the store takes in one commit; send its events in several requests")})
			if e.replay(t, nil) {
				continue
			}
			return
		}
		if err != nil {
			e.failQueue(t, batch, err)
			return
		}
		conflicts = 0
		e.counters.Batches.Add(1)
		e.counters.Events.Add(int64(len(b.Events)))
		t.wmu.Lock()
		t.committed = res.Version
		for _, pd := range batch {
			// Committed and folded: retries find the runs in the
			// committed state now.
			for _, k := range pd.idemKeys {
				if t.idemPending[k] == pd {
					delete(t.idemPending, k)
				}
			}
		}
		t.wmu.Unlock()
		i := 0
		before := res.Before
		for _, pd := range batch {
			n := len(pd.events)
			recs := res.Records[i : i+n : i+n]
			pd.finish(outcome{records: recs, before: before, result: pd.result})
			if n > 0 {
				before = recs[n-1].Offset
			}
			i += n
		}
	}
}

// maxGatherYields bounds how long gather holds a batch back: each yield
// lets every goroutine that is ready to run do so once.
const maxGatherYields = 16

// gather yields the processor, with t.wmu released, as long as plans keep
// arriving in t's queue, so that the next batch takes them too. flush calls
// it when recent batches combined several plans (many appenders on one
// thread): the requests being handled at that moment then share the next
// commit instead of each waiting for one of their own (one thread, 16
// appends of one event in flight: server CPU per event 65.5 → 44.9 µs). A
// thread whose batches hold one plan (a lone producer, whose next append
// waits for this one) never waits here. t.wmu must be held; it is held
// again on return.
func gather(t *thread) {
	for range maxGatherYields {
		n := len(t.queue)
		t.wmu.Unlock()
		runtime.Gosched()
		t.wmu.Lock()
		if len(t.queue) == n {
			return
		}
	}
}

// combine puts the plans of batch, in order, into b.
func combine(b *store.Batch, batch []*pending) {
	byID := make(map[string]int)
	byKey := make(map[string]int)
	for _, pd := range batch {
		b.Events = append(b.Events, pd.events...)
		b.Encoded = append(b.Encoded, pd.encoded...)
		for _, p := range pd.producers {
			if i, ok := byKey[p.Key]; ok {
				b.Producers[i] = p
			} else {
				byKey[p.Key] = len(b.Producers)
				b.Producers = append(b.Producers, p)
			}
		}
		for _, c := range pd.checks {
			// A run an earlier plan of the batch writes was checked
			// on top of that write.
			if _, ok := byID[c.RunID]; !ok {
				b.Leases = append(b.Leases, c)
			}
		}
		for _, r := range pd.runs {
			if i, ok := byID[r.Run.ID]; ok {
				b.Runs[i] = r
			} else {
				byID[r.Run.ID] = len(b.Runs)
				b.Runs = append(b.Runs, r)
			}
		}
	}
}

// maxConflicts bounds how often one batch is validated again after losing
// a race with another node before the appenders get an error.
const maxConflicts = 32

// replay catches a thread up with the store after a conflict, rebuilds its
// speculative state, and validates the failed batch's plans and the queued
// ones again, in order: those that still hold are queued, the others get
// their error. It returns false if the catch-up failed (the plans then got
// an error).
func (e *Engine) replay(t *thread, failed []*pending) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := e.catchUp(ctx, t)
	if err != nil {
		e.failQueue(t, failed, err)
		return false
	}
	t.wmu.Lock()
	defer t.wmu.Unlock()
	all := append(failed, t.queue...)
	t.queue = nil
	e.rebuild(t, rows)
	for _, old := range all {
		pd, result, err := e.plan(t, old.plan)
		switch {
		case err != nil:
			old.finish(outcome{err: err})
		case pd == nil:
			old.finish(outcome{result: result, before: tether.OffsetStart})
		default:
			pd.done = old.done
			close(old.settled)
			t.queue = append(t.queue, pd)
		}
	}
	return true
}

// failQueue fails a batch the store refused and everything queued after
// it: they were validated on top of it. The thread's state is dropped and
// loaded again from the store on next use.
func (e *Engine) failQueue(t *thread, batch []*pending, err error) {
	e.counters.CommitErrors.Add(1)
	e.log.Error("commit failed", "thread", t.id, "err", err)
	t.wmu.Lock()
	t.broken = true
	rest := t.queue
	t.queue = nil
	t.flushing = false
	t.idle.Broadcast()
	t.wmu.Unlock()
	e.forget(t)
	cerr := e.storeErr(err, "thread %s", t.id)
	if tether.CodeOf(cerr) == tether.CodeInternal {
		cerr = tether.Wrap(err, tether.CodeUnavailable, "the events could not be stored; retry")
	}
	for _, pd := range append(batch, rest...) {
		pd.finish(outcome{err: cerr})
	}
}

// onCommit receives every committed batch from the store, in commit order:
// it folds the events into the thread's committed state, publishes them,
// and queues runs that became ready to start.
func (e *Engine) onCommit(c *store.Committed) {
	if c.Deleted {
		e.deletedElsewhere(c)
		return
	}
	t := e.entry(c.ThreadID)
	var next []tether.Run
	if t != nil {
		t.rmu.Lock()
		if t.state == nil {
			// Still loading: the load folds it when it is done.
			t.early = append(t.early, c)
			t.rmu.Unlock()
			t = nil
		}
	}
	if t != nil {
		bytes := 0
		for i, ev := range c.Events {
			e.fold(t, ev)
			bytes += len(c.Records[i].Data)
		}
		e.noteFolded(t, bytes)
		for _, ev := range c.Events {
			if ev.Type == tether.EventRunCreated || ev.Type == tether.EventRunFinished {
				if r, ok := t.state.Machine().NextPending(); ok {
					next = append(next, r)
				}
				break
			}
		}
		t.rmu.Unlock()
	}
	e.hub.Publish(c.ThreadID, c.Before, c.Records)
	for _, r := range next {
		e.queue.push(r.Agent, r.ID, r.ThreadID)
	}
	if t == nil {
		e.dispatchUncached(c)
	}
}
