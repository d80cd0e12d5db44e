package engine

import (
	"encoding/json"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/runs"
)

// The state a run request gives the thread (RunRequest.State) is written
// in the append that creates the run, as one event: the state whole
// (state.snapshot) when it fits in an event, else what it changes in the
// thread's state (state.delta). A thread's state may grow to 8 MiB by an
// agent's deltas, far past the largest event, and a front end that holds
// it edits a little of it between runs and sends it whole with every run:
// written whole it would be refused, that run and every later one.

// frontState emits the event of run runID that makes state the thread's
// (nothing if it is the thread's already). The encoding that tells
// whether the event fits is the one committed (emitEncoded): a front
// end's state, sent whole with every run, is encoded once.
func (p *planner) frontState(runID string, state json.RawMessage) error {
	ev := &tether.Event{Type: tether.EventStateSnapshot, RunID: runID, State: state}
	if b, err := p.encode(ev); err == nil {
		return p.emitEncoded(ev, b)
	}
	if from := p.tx.State(); from != nil {
		patch := runs.StatePatch(from, state)
		if string(patch) == "[]" {
			return nil
		}
		d := &tether.Event{Type: tether.EventStateDelta, RunID: runID, Patch: patch}
		if b, err := p.encode(d); err == nil {
			return p.emitEncoded(d, b)
		}
	}
	return p.e.frontStateTooLarge(state)
}

func (e *Engine) frontStateTooLarge(state json.RawMessage) error {
	return tether.Errorf(tether.CodeTooLarge, "the state given with the run (%d bytes of JSON) changes more of the thread's state than the largest event this server takes (%d bytes) can hold: send a smaller change", len(state), e.opts.MaxEventBytes)
}

// checkNewThreadState returns what a run request's state gets on a
// thread with no state yet, which it must give whole. The run is not
// made yet, so neither is the event the run commits: a state that fits
// for certain (snapshotBound) is not encoded here, which leaves the run's
// own encoding the only one.
func (e *Engine) checkNewThreadState(state json.RawMessage) error {
	if len(state) == 0 || snapshotBound(state) <= e.opts.MaxEventBytes {
		return nil
	}
	// A run ID as long as the engine's, and a timestamp as long.
	ev := &tether.Event{Type: tether.EventStateSnapshot, RunID: tether.NewID("run_"), TS: tether.Now(), State: state}
	if _, err := e.encodeEvent(ev); err != nil {
		return e.frontStateTooLarge(state)
	}
	return nil
}

// snapshotBound is at least the size of the encoding of a state.snapshot
// event of state (Event.Encode) by any run: the encoding writes the state
// compact, with <, > and & as \u003c (5 bytes more each) and U+2028 and
// U+2029 as \u2028 (3 more), and the event's other fields (type, ts,
// run_id) in less than snapshotFields.
func snapshotBound(state json.RawMessage) int {
	n := len(state) + snapshotFields
	for i, c := range state {
		switch {
		case c == '<' || c == '>' || c == '&':
			n += 5
		case c == 0xE2 && i+2 < len(state) && state[i+1] == 0x80 && state[i+2]&^1 == 0xA8:
			n += 3
		}
	}
	return n
}

// snapshotFields bounds what a state.snapshot's encoding holds besides
// its state: `{"type":"state.snapshot","ts":"…","run_id":"run_…","state":}`
// is under 120 bytes with the engine's run IDs and timestamps.
const snapshotFields = 256
