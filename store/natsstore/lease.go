package natsstore

import (
	"context"

	"github.com/tetherhq/tether/store"
)

// checkLeases returns store.ErrConflict unless each run holds, as of st,
// the lease its check names (store.Batch.Leases). A renewal is a message of
// the thread's log, so the publish's expected last sequence makes this
// check and the batch's append one step: a renewal that lands after st
// fails the publish, and the commit checks again on the new state.
func (s *Store) checkLeases(ctx context.Context, e *entry, st state, create bool, checks []store.LeaseCheck) error {
	for _, c := range checks {
		var w *wireRun
		if !create {
			e.mu.Lock()
			tr := st.v.runs[c.RunID]
			e.mu.Unlock()
			var tail map[string]*tailRun
			if tr != nil {
				tail = map[string]*tailRun{c.RunID: tr}
			}
			var err error
			if w, err = s.runOf(ctx, e.id, st.inc, tail, c.RunID); err != nil {
				return err
			}
		}
		if !c.Holds(w.lease()) {
			return store.ErrConflict
		}
	}
	return nil
}

// lease returns the run's lease; a missing run holds the zero lease.
func (w *wireRun) lease() store.Lease {
	if w == nil {
		return store.Lease{}
	}
	return store.Lease{Token: w.Token, Owner: w.Owner, Node: w.Node, Resumable: w.Resumable, ExpiresAt: fromNanos(w.Expires)}
}
