package engine

import (
	"context"
	"errors"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

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
	pd, result, err := e.acceptCurrent(ctx, t, plan)
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
			pd, result, err = e.acceptCurrent(ctx, t, plan)
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

// maxForeign bounds how often update catches up with other nodes' events
// for one plan before it gives up with a retryable error.
const maxForeign = 32

// acceptCurrent is accept on a state that has every event this node has
// seen: when another node committed to the thread since this one last did
// (errForeign), it catches up and validates again, as often as the other
// node keeps committing in between, up to maxForeign times.
func (e *Engine) acceptCurrent(ctx context.Context, t *thread, plan func(*planner) error) (*pending, any, error) {
	for i := 0; ; i++ {
		pd, result, err := e.accept(t, plan)
		if err != errForeign {
			return pd, result, err
		}
		if i == maxForeign {
			return nil, nil, tether.Errorf(tether.CodeUnavailable, "thread %s: other nodes keep writing to it; retry", t.id)
		}
		if err := e.resync(ctx, t); err != nil {
			return nil, nil, err
		}
		if e.afterResync != nil {
			e.afterResync()
		}
	}
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
