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
