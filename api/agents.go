package api

import (
	"net/http"

	"github.com/tetherhq/tether/engine"
)

// listAgents answers GET /v1/agents: the agent names runs are accepted
// for, and why (in-process, declared, claimed lately).
func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) {
	list, err := s.e.Agents(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Agents []engine.AgentInfo `json:"agents"`
	}{list})
}

// declareAgent answers PUT /v1/agents/{name}: 201 for a new declaration,
// 200 for one that was there.
func (s *Server) declareAgent(w http.ResponseWriter, r *http.Request) {
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &struct{}{}, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	a, created, err := s.e.DeclareAgent(r.Context(), r.PathValue("name"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, a)
}

// removeAgent answers DELETE /v1/agents/{name}.
func (s *Server) removeAgent(w http.ResponseWriter, r *http.Request) {
	if err := s.e.RemoveAgent(r.Context(), r.PathValue("name")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
