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

// frontStateEvent returns the event that makes state the thread's, whose
// state is now from (nil while null), for run runID at now; nil if it is
// the thread's already.
func (e *Engine) frontStateEvent(runID string, from, state json.RawMessage, now tether.Time) (*tether.Event, error) {
	ev := &tether.Event{Type: tether.EventStateSnapshot, RunID: runID, TS: now, State: state}
	if e.fits(ev) {
		return ev, nil
	}
	if from != nil {
		patch := runs.StatePatch(from, state)
		if string(patch) == "[]" {
			return nil, nil
		}
		d := &tether.Event{Type: tether.EventStateDelta, RunID: runID, TS: now, Patch: patch}
		if e.fits(d) {
			return d, nil
		}
	}
	return nil, e.frontStateTooLarge(state)
}

// fits reports whether ev is within the largest event.
func (e *Engine) fits(ev *tether.Event) bool {
	b, err := ev.Encode()
	return err == nil && len(b) <= e.opts.MaxEventBytes
}

func (e *Engine) frontStateTooLarge(state json.RawMessage) error {
	return tether.Errorf(tether.CodeTooLarge, "the state given with the run (%d bytes of JSON) changes more of the thread's state than the largest event this server takes (%d bytes) can hold: send a smaller change", len(state), e.opts.MaxEventBytes)
}

// checkNewThreadState returns what a run request's state gets on a
// thread with no state yet, which it must give whole.
func (e *Engine) checkNewThreadState(state json.RawMessage) error {
	if len(state) == 0 {
		return nil
	}
	// A run ID as long as the engine's, and a timestamp as long.
	ev := &tether.Event{Type: tether.EventStateSnapshot, RunID: tether.NewID("run_"), TS: tether.Now(), State: state}
	if !e.fits(ev) {
		return e.frontStateTooLarge(state)
	}
	return nil
}
