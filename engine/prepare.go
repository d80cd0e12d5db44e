package engine

import (
	"errors"
	"fmt"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// prepare encodes a plan's events, computes the rows it changes and commits
// its transaction to the speculative machine. It returns nil if there is
// nothing to write.
func (e *Engine) prepare(p *planner) (*pending, error) {
	t := p.t
	pd := &pending{events: p.events, done: make(chan outcome, 1), settled: make(chan struct{})}
	pd.encoded = make([][]byte, len(p.events))
	for i, ev := range p.events {
		if i < len(p.encoded) && p.encoded[i] != nil {
			pd.encoded[i] = p.encoded[i] // checked when the plan encoded it
			continue
		}
		b, err := e.encodeEvent(ev)
		var size *eventSizeError
		if errors.As(err, &size) {
			return nil, tether.Errorf(tether.CodeTooLarge, "event %d (%s) is %v", i, ev.Type, size)
		}
		if err != nil {
			return nil, tether.Wrap(err, tether.CodeBadRequest, fmt.Sprintf("event %d (%s) cannot be encoded", i, ev.Type))
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
