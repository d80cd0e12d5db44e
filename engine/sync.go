package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// Several engines (nodes) may share one store. Each folds every committed
// batch it is notified of, its own and the others', into its committed
// state; but its speculative state and what it keeps besides the log
// (leases, idempotency keys, producers) can be behind. Two mechanisms keep
// that from mattering:
//
//   - a commit validated on a stale state fails in the store (the thread's
//     version moved on): the engine catches up and validates the queued
//     plans again (replay);
//   - a plan rejected on a state that may be stale (behind) is validated
//     again once the thread is caught up (resync).
//
// On a store with one engine neither ever triggers beyond one cheap read.

// behind reports whether this engine's speculative state may be stale: the
// store holds events of the thread it has not folded yet, or it folded
// events of another node that its speculative state (and what it caches
// besides the log: producers, leases) does not reflect yet.
func (e *Engine) behind(ctx context.Context, t *thread) (bool, error) {
	rec, err := e.st.Thread(ctx, t.id)
	if err != nil {
		return false, e.storeErr(err, "thread %s", t.id)
	}
	t.wmu.Lock()
	committed := t.committed
	t.wmu.Unlock()
	t.rmu.Lock()
	defer t.rmu.Unlock()
	return rec.Version > t.folded || t.folded != committed, nil
}

// resync catches a thread up with the store and rebuilds its speculative
// state, once no batch of this engine is in flight for it.
func (e *Engine) resync(ctx context.Context, t *thread) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	for t.flushing {
		t.idle.Wait()
	}
	rows, err := e.catchUp(ctx, t)
	if err != nil {
		return err
	}
	e.rebuild(t, rows)
	return nil
}

// catchUp folds into the committed state the events the store has after
// it, and reads the rows of the thread's unfinished runs.
func (e *Engine) catchUp(ctx context.Context, t *thread) (map[string]*store.RunRecord, error) {
	if err := e.refresh(ctx, t); err != nil {
		return nil, err
	}
	t.rmu.Lock()
	runs := t.state.Machine().Runs()
	t.rmu.Unlock()
	rows := make(map[string]*store.RunRecord)
	for _, r := range runs {
		if r.Status.Terminal() {
			continue
		}
		rr, err := e.runRecord(ctx, t.id, r.ID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, e.storeErr(err, "run %s", r.ID)
		}
		rows[r.ID] = rr
	}
	return rows, nil
}

// refresh folds into the committed state the events the store has after
// it. Events folded by the notify path meanwhile are skipped by offset.
func (e *Engine) refresh(ctx context.Context, t *thread) error {
	t.rmu.Lock()
	after := t.state.Offset()
	t.rmu.Unlock()
	for {
		recs, err := e.st.ReadEvents(ctx, t.id, after, 1000)
		if err != nil {
			return e.storeErr(err, "thread %s", t.id)
		}
		t.rmu.Lock()
		for _, r := range recs {
			ev, err := r.Decode()
			if err != nil {
				t.rmu.Unlock()
				return fmt.Errorf("catch up thread %s: decode event %s: %w", t.id, r.Offset, err)
			}
			e.fold(t, ev)
		}
		t.rmu.Unlock()
		if len(recs) < 1000 {
			return nil
		}
		after = recs[len(recs)-1].Offset
	}
}

// foldedCount returns how many events the committed state holds.
func (t *thread) foldedCount() int64 {
	t.rmu.Lock()
	defer t.rmu.Unlock()
	return t.folded
}

// fold applies a committed event to the committed state unless it is
// already there. t.rmu must be held.
func (e *Engine) fold(t *thread, ev *tether.Event) {
	if !ev.Offset.After(t.state.Offset()) {
		return
	}
	if err := t.state.Apply(ev); err != nil {
		e.log.Error("committed event does not fold", "thread", t.id, "offset", ev.Offset, "err", err)
	}
	t.folded++
}

// dispatchUncached queues the runs a batch of a thread this engine has not
// loaded may have made ready: another node committed it. A claim checks
// each entry against the thread's state, so a stale one costs a load.
func (e *Engine) dispatchUncached(c *store.Committed) {
	for _, ev := range c.Events {
		switch {
		case ev.Type == tether.EventRunCreated && ev.Run != nil:
			e.queue.push(ev.Run.Agent, ev.Run.ID, c.ThreadID)
		case ev.Type == tether.EventRunFinished && !e.closed.Load():
			// The thread's next pending run may start now; finding it
			// takes a load, which must not run on the notify path.
			e.bg.Add(1)
			go func() {
				defer e.bg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := e.requeue(ctx, c.ThreadID); err != nil && tether.CodeOf(err) != tether.CodeNotFound {
					e.log.Warn("requeue", "thread", c.ThreadID, "err", err)
				}
			}()
			return
		}
	}
}

// rebuild makes the speculative state the committed one, with the rows
// read by catchUp. t.wmu must be held and nothing may be in flight.
func (e *Engine) rebuild(t *thread, rows map[string]*store.RunRecord) {
	t.rmu.Lock()
	t.spec = t.state.Machine().Clone()
	t.version, t.committed = t.folded, t.folded
	t.rmu.Unlock()
	t.extras = make(map[string]*runExtra, len(rows))
	t.producers = make(map[string]*store.Producer)
	t.prodPending = make(map[string]*pending)
	t.gen++
	for id, rr := range rows {
		t.extras[id] = &runExtra{key: rr.IdempotencyKey, multitask: rr.Multitask, lease: rr.Lease, saved: *rr}
		if rr.IdempotencyKey != "" {
			t.idem[rr.IdempotencyKey] = id
		}
	}
}

// deletedElsewhere drops what this node holds of a thread another node
// deleted: its cached state and its subscriptions (which end, as on the
// node that deleted it). A state that is already of a newer incarnation
// (loaded from the store after the deletion, ahead of this notification)
// is kept. It runs on the notify path, so it takes no write lock: a write
// queued on the dropped state fails in the store, whose log has moved on.
func (e *Engine) deletedElsewhere(c *store.Committed) {
	if t := e.entry(c.ThreadID); t != nil {
		t.rmu.Lock()
		newer := t.state != nil && t.state.Offset().After(c.Before)
		t.rmu.Unlock()
		if newer {
			return
		}
		e.forget(t)
	}
	e.delGen(c.ThreadID).Add(1)
	e.hub.CloseThread(c.ThreadID)
	e.queue.removeThread(c.ThreadID)
}
