package runs

import tether "github.com/tetherhq/tether"

// WorkerEvent checks that a worker holding run runID may send e: not an
// event type only the server writes (run.created, run.started, run.input,
// run.cancel_requested), not run.finished with status aborted (the server's
// verdict on a lost worker), no offset or ts (the server sets them), and
// run_id empty or runID. It returns a bad_request *tether.Error otherwise.
// Whether e is valid in the run's state is for Tx.Apply to say.
func WorkerEvent(e *tether.Event, runID string) error {
	switch e.Type {
	case tether.EventRunCreated, tether.EventRunStarted, tether.EventRunInput, tether.EventRunCancelRequested:
		return badRequest("%s events are written by the server, not by workers", e.Type)
	case tether.EventRunFinished:
		if e.Status == string(tether.RunAborted) {
			return badRequest("status aborted is set by the server; a worker finishes a failed run with status error")
		}
	}
	if e.Offset != "" {
		return badRequest("field %q is set by the server", "offset")
	}
	if !e.TS.IsZero() {
		return badRequest("field %q is set by the server", "ts")
	}
	if e.RunID != "" && e.RunID != runID {
		return badRequest("run_id %s is not the run %s this worker holds", q(e.RunID), runID)
	}
	return nil
}

// WorkerRules checks, beyond [WorkerEvent], what a worker may send given
// the state tx sees (call it before tx.Apply of each event, with e.RunID
// set). These rules bind workers only: the server's own events and events
// already in a log are never held to them, so a log written before they
// existed still folds.
//
//   - After run.cancel_requested the worker may end the run only with
//     run.finished cancelled: done or error is conflict. A client asked
//     for the run to stop; its outcome is the cancel, whatever the worker
//     had ready (protocol §4, Cancel).
//   - message.updated may not touch the run's input messages (bad_request):
//     they are the user's words, not the worker's.
//   - run.waiting may not ask under the id of a request of the run that
//     was answered (conflict): a client that repeats an answer whose
//     outcome it could not learn would answer the new request with it
//     (protocol §4, Input).
func WorkerRules(tx *Tx, e *tether.Event) error {
	switch e.Type {
	case tether.EventRunWaiting:
		if e.Request != nil {
			if answered, _ := tx.Answered(e.RunID, e.Request.ID, nil); answered {
				return conflict("request %s of run %s was asked and answered before: ask under a new id", q(e.Request.ID), e.RunID)
			}
		}
	case tether.EventRunFinished:
		r, ok := tx.Run(e.RunID)
		if ok && !r.CancelRequestedAt.IsZero() && !r.Status.Terminal() && e.Status != string(tether.RunCancelled) {
			return conflict("a cancel of run %s was requested: finish it with status cancelled, not %s", e.RunID, q(e.Status))
		}
	case tether.EventMessageUpdated:
		if m, ok := tx.Message(e.MessageID); ok && m.Input && m.RunID == e.RunID {
			return badRequest("message %s is an input of run %s: a worker may not change it", e.MessageID, e.RunID)
		}
	}
	return nil
}
