package engine

import (
	"errors"

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
	encoded   [][]byte               // events' encodings made by the plan (emitEncoded); nil where prepare makes them
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
func (p *planner) emit(ev *tether.Event) error { return p.emitEncoded(ev, nil) }

// encode returns ev's encoding as the plan commits it (its ts set), or
// *eventSizeError if it is over the largest event: for a plan that must
// know before it emits ev (emitEncoded) whether ev fits.
func (p *planner) encode(ev *tether.Event) ([]byte, error) {
	ev.TS = p.now
	return p.e.encodeEvent(ev)
}

// emitEncoded is emit for an event the plan encoded (encode) as b, left
// unchanged since: b is what is committed, so that the size check the
// plan made is the only encoding. A nil b is emit's.
func (p *planner) emitEncoded(ev *tether.Event, b []byte) error {
	ev.TS = p.now
	if err := p.tx.Apply(ev); err != nil {
		return eventErr(len(p.events), ev, err)
	}
	p.push(ev, b)
	return nil
}

// push adds an applied event to the plan, with its encoding b (nil: the
// plan's commit encodes it). p.encoded, once a plan holds an encoding,
// stays one entry per event.
func (p *planner) push(ev *tether.Event, b []byte) {
	if b != nil && p.encoded == nil {
		p.encoded = make([][]byte, len(p.events), len(p.events)+1)
	}
	p.events = append(p.events, ev)
	if p.encoded != nil {
		p.encoded = append(p.encoded, b)
	}
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
