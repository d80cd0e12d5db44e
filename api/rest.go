package api

import (
	"encoding/json"
	"net/http"
	"strconv"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/clip"
	"github.com/tetherhq/tether/store"
)

func errNoRoute(r *http.Request) error {
	return tether.Errorf(tether.CodeNotFound, "no route for %s %s", r.Method, r.URL.Path)
}

func (s *Server) createThread(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ID       string          `json:"id"`
		Metadata json.RawMessage `json:"metadata"`
	}
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &body, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkObject(body.Metadata, "metadata"); err != nil {
		s.writeError(w, r, err)
		return
	}
	p := principalOf(r)
	th, created, err := s.e.CreateOwnedThread(r.Context(), body.ID, ownerOf(p), body.Metadata)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !created && !p.sees(th.Owner, th.ID) {
		// Someone else's: its ID is taken, and nothing more is said.
		s.writeError(w, r, tether.Errorf(tether.CodeConflict, "thread %s already exists", clip.ID(th.ID)))
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/threads/"+th.ID)
	}
	writeJSON(w, status, th)
}

func (s *Server) listThreads(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	// A filter given twice (or empty) would be half ignored: refuse it.
	for _, name := range []string{"status", "limit", "cursor"} {
		if len(q[name]) > 1 {
			s.writeError(w, r, tether.Errorf(tether.CodeBadRequest, "%s is given more than once", name))
			return
		}
	}
	// A user's token lists only the threads it may see.
	tq := store.ThreadQuery{Status: tether.ThreadStatus(q.Get("status")), Cursor: q.Get("cursor"),
		Visible: principalOf(r).visibility()}
	switch tq.Status {
	case tether.ThreadIdle, tether.ThreadBusy, tether.ThreadWaiting, tether.ThreadError:
	case "":
		if q.Has("status") {
			s.writeError(w, r, tether.Errorf(tether.CodeBadRequest, "status must be idle, busy, waiting or error"))
			return
		}
	default:
		s.writeError(w, r, tether.Errorf(tether.CodeBadRequest, "status must be idle, busy, waiting or error"))
		return
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			s.writeError(w, r, tether.Errorf(tether.CodeBadRequest, "limit must be a number from 1 to 1000"))
			return
		}
		tq.Limit = n
	}
	page, err := s.e.Threads(r.Context(), tq)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	threads := page.Threads
	if threads == nil {
		threads = []tether.Thread{}
	}
	var next *string
	if page.Next != "" {
		next = &page.Next
	}
	writeJSON(w, http.StatusOK, struct {
		Threads    []tether.Thread `json:"threads"`
		NextCursor *string         `json:"next_cursor"`
	}{threads, next})
}

func (s *Server) getThread(w http.ResponseWriter, r *http.Request) {
	snap, err := s.e.Thread(r.Context(), r.PathValue("tid"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, snap)
}

func (s *Server) deleteThread(w http.ResponseWriter, r *http.Request) {
	if err := s.e.DeleteThread(r.Context(), r.PathValue("tid")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) finalAnswer(w http.ResponseWriter, r *http.Request) {
	fa, err := s.e.FinalAnswer(r.Context(), r.PathValue("tid"), r.URL.Query().Get("run_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, fa)
}

// runBody is the body of POST /v1/threads/{tid}/runs.
type runBody struct {
	Agent     string           `json:"agent"`
	Input     *tether.RunInput `json:"input"`
	Metadata  json.RawMessage  `json:"metadata"`
	Multitask tether.Multitask `json:"multitask"`
}

// newRun decodes a run request and creates the run.
func (s *Server) newRun(r *http.Request) (*engine.RunCreated, error) {
	var body runBody
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &body, false); err != nil {
		return nil, err
	}
	if err := checkObject(body.Metadata, "metadata"); err != nil {
		return nil, err
	}
	if body.Agent == "" {
		body.Agent = s.opts.DefaultAgent
	}
	req := engine.RunRequest{Agent: body.Agent, Metadata: body.Metadata, Multitask: body.Multitask,
		IdempotencyKey: r.Header.Get("Idempotency-Key")}
	if body.Input != nil {
		req.Input = *body.Input
	}
	return s.e.CreateRun(r.Context(), r.PathValue("tid"), req)
}

func (s *Server) createRun(w http.ResponseWriter, r *http.Request) {
	rc, err := s.newRun(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if rc.Created {
		status = http.StatusCreated
	}
	w.Header().Set("Location", "/v1/runs/"+rc.Run.ID)
	writeJSON(w, status, rc.Run)
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	snap, err := s.e.Run(r.Context(), r.PathValue("rid"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	run := snap.Runs[0]
	// A pending run's place in line is this node's live view, not part of
	// the log: it is here, not in the run (protocol.md §4).
	var q *runQueue
	if run.Status == tether.RunPending {
		if p := s.e.QueuePosition(run.Agent, run.ID); p > 0 {
			q = &runQueue{Position: p}
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Run      tether.Run       `json:"run"`
		Messages []tether.Message `json:"messages"`
		Offset   tether.Offset    `json:"offset"`
		Queue    *runQueue        `json:"queue,omitempty"`
	}{run, snap.Messages, snap.Offset, q})
}

// runQueue is where a pending run waits: its place in line on this node,
// 1 for the next run to start.
type runQueue struct {
	Position int `json:"position"`
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &struct{}{}, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	run, err := s.e.CancelRun(r.Context(), r.PathValue("rid"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, run)
}

func (s *Server) submitInput(w http.ResponseWriter, r *http.Request) {
	var body struct {
		RequestID string          `json:"request_id"`
		Value     json.RawMessage `json:"value"`
	}
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &body, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if body.RequestID == "" {
		s.writeError(w, r, tether.Errorf(tether.CodeBadRequest, "request_id is required"))
		return
	}
	run, err := s.e.SubmitInput(r.Context(), r.PathValue("rid"), body.RequestID, body.Value)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, run)
}
