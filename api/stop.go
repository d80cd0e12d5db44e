package api

import (
	"net/http"

	tether "github.com/tetherhq/tether"
)

// stopRun answers a stop button's request (the AI SDK's …/stop, AG-UI's
// …/cancel): a client's abort is only a disconnect, which a durable run
// outlives, so this asks the run to end. It cancels run rid of thread tid,
// or for "current" the thread's active run (204 when it has none), and
// answers 202 with the run, as POST /v1/runs/{rid}/cancel does. A thread
// that does not exist yet (a stop before the first run made it), or that
// the user may not see, has no current run to stop (204) rather than
// being not found, so that the two look alike.
func (s *Server) stopRun(w http.ResponseWriter, r *http.Request, tid, rid string) {
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &struct{}{}, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	snap, err := s.e.Thread(r.Context(), tid)
	if err == nil && !principalOf(r).sees(snap.Thread.Owner, snap.Thread.ID) {
		err = errThreadNotFound(tid) // created since guard looked, not the user's
	}
	switch {
	case err != nil && rid == "current" && tether.CodeOf(err) == tether.CodeNotFound:
		w.WriteHeader(http.StatusNoContent)
		return
	case err != nil:
		s.writeError(w, r, err)
		return
	case rid == "current":
		if rid = snap.Thread.ActiveRunID; rid == "" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
	default:
		if rid, err = s.currentRun(r.Context(), tid, rid, snap); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	run, err := s.e.CancelRun(r.Context(), rid)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, run)
}
