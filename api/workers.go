package api

import (
	"net/http"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
)

func (s *Server) claim(w http.ResponseWriter, r *http.Request) {
	var body struct {
		WorkerID string   `json:"worker_id"`
		Agents   []string `json:"agents"`
		WaitMs   int64    `json:"wait_ms"`
	}
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &body, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if body.WaitMs < 0 {
		s.writeError(w, r, tether.Errorf(tether.CodeBadRequest, "wait_ms must not be negative"))
		return
	}
	wait := min(time.Duration(body.WaitMs)*time.Millisecond, s.opts.MaxWait)
	c, err := s.e.Claim(r.Context(), engine.ClaimRequest{WorkerID: body.WorkerID, Agents: body.Agents, Wait: wait})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if c == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Run      tether.Run       `json:"run"`
		Messages []tether.Message `json:"messages"`
		Lease    engine.LeaseInfo `json:"lease"`
		Offset   tether.Offset    `json:"offset"`
	}{c.Run, c.Messages, c.Lease, c.Offset})
}

func (s *Server) appendEvents(w http.ResponseWriter, r *http.Request) {
	b, err := readBody(r, s.opts.MaxBodyBytes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	evs, err := tether.DecodeEvents(b)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(evs) == 0 {
		s.writeError(w, r, tether.Errorf(tether.CodeBadRequest, "events: the array is empty"))
		return
	}
	res, err := s.e.Append(r.Context(), r.PathValue("rid"), r.Header.Get("Tether-Lease"), evs)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) {
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &struct{}{}, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.e.Heartbeat(r.Context(), r.PathValue("rid"), r.Header.Get("Tether-Lease"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
