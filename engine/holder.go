package engine

import (
	"context"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
	"github.com/tetherhq/tether/runs"
	"github.com/tetherhq/tether/store"
)

// Holder is who appends to a run or heartbeats it: the lease token it was
// given at the claim, and the API key it calls with. A lease token is a
// bearer secret; binding the lease to the key that claimed it means a
// token that leaks (a log, another worker's process) is of no use under
// another key.
type Holder struct {
	// Token is the lease token (Tether-Lease).
	Token string
	// KeyID names the caller's API key (ClaimRequest.KeyID); empty
	// without one (auth off, an in-process agent).
	KeyID string
}

// check refuses a holder whose key is not the one the lease was claimed
// with. A lease without a key (claimed with none, or stored before leases
// named their key) takes any.
func (h Holder) check(runID string, l store.Lease) error {
	if l.KeyID != "" && l.KeyID != h.KeyID {
		return tether.Errorf(tether.CodeLeaseLost, "the lease on run %s is not yours: it was claimed with another API key", runID)
	}
	return nil
}

// bind returns the lease bound to the holder's key, if it names none yet:
// a lease stored before leases named their key is taken by the first key
// that presents its token (it held the secret), so that its worker reads
// its run afterwards (HeldBy). An in-process lease stays unbound.
func (h Holder) bind(l store.Lease) store.Lease {
	if l.KeyID == "" && h.KeyID != "" && l.Node == "" {
		l.KeyID = h.KeyID
	}
	return l
}

// emitWorker emits a worker's events, each checked first against the
// rules that bind workers only (runs.WorkerRules), naming the failing one
// by its index in the request.
func (p *planner) emitWorker(evs []*tether.Event) error {
	for i, ev := range evs {
		ev.TS = p.now
		if err := runs.WorkerRules(p.tx, ev); err != nil {
			return eventErr(i, ev, err)
		}
		if err := p.tx.Apply(ev); err != nil {
			return eventErr(i, ev, err)
		}
		p.push(ev, nil)
	}
	return nil
}

// HeldBy reports whether a run's lease, current or the last one once the
// run finished, was claimed with the API key keyID (not empty). A run
// never claimed, claimed without a key, or run in-process is held by no
// key. It returns not_found for an unknown run.
//
// Only a "no" costs a store read: on a store shared by several nodes,
// another node's claim may not have reached this node's memory yet.
func (e *Engine) HeldBy(ctx context.Context, runID, keyID string) (bool, error) {
	if keyID == "" {
		return false, nil
	}
	t, err := e.threadOfRun(ctx, runID)
	if err != nil {
		return false, err
	}
	t.wmu.Lock()
	held := false
	if x := t.extras[runID]; x != nil {
		held = x.lease.KeyID == keyID
	}
	t.wmu.Unlock()
	if held {
		return true, nil
	}
	rr, err := e.runRecord(ctx, t.id, runID)
	if err != nil {
		return false, e.storeErr(err, "run %s", clip.ID(runID))
	}
	return rr.Lease.KeyID == keyID, nil
}
