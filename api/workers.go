package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
)

func (s *Server) claim(w http.ResponseWriter, r *http.Request) {
	var body struct {
		WorkerID  string   `json:"worker_id"`
		Agents    []string `json:"agents"`
		WaitMs    int64    `json:"wait_ms"`
		Resumable bool     `json:"resumable"`
	}
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &body, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if body.WaitMs < 0 {
		s.writeError(w, r, tether.Errorf(tether.CodeBadRequest, "wait_ms must not be negative"))
		return
	}
	if !principalOf(r).mayClaim(body.Agents) {
		s.writeError(w, r, tether.Errorf(tether.CodeForbidden, "the token may claim runs only of the agents of its tether.agents"))
		return
	}
	wait := s.maxWait(body.WaitMs)
	if wait > 0 {
		release, ok := s.holdStream(w, r)
		if !ok {
			return
		}
		defer release()
	}
	// The wait ends at its time or when the server starts stopping, but
	// a claim being committed then is still answered: only the worker
	// going away (the request's context) gives it up, and the engine then
	// hands the run to the next claim.
	c, err := s.e.Claim(r.Context(), engine.ClaimRequest{WorkerID: body.WorkerID, Agents: body.Agents, Wait: wait,
		Resumable: body.Resumable, KeyID: keyOf(r).id, Stop: s.stopping.Done()})
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
		State    json.RawMessage  `json:"state,omitempty"`
	}{c.Run, c.Messages, c.Lease, c.Offset, c.State})
}

func (s *Server) appendEvents(w http.ResponseWriter, r *http.Request) {
	b, err := readBody(r, s.opts.MaxBodyBytes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	evs, unreadable := tether.DecodeEvents(b)
	if unreadable == nil && len(evs) == 0 {
		unreadable = tether.Errorf(tether.CodeBadRequest, "events: the array is empty")
	}
	prod, err := producerOf(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var res *engine.AppendResult
	if unreadable != nil {
		// Answered after the run and its lease are checked, as every
		// fault of the events is (protocol.md §6).
		res, err = s.e.RefuseAppend(r.Context(), r.PathValue("rid"), holder(r), prod, unreadable)
	} else {
		res, err = s.e.ProducerAppend(r.Context(), r.PathValue("rid"), holder(r), prod, evs)
	}
	var pe *engine.ProducerError
	if errors.As(err, &pe) {
		switch pe.Err.Code {
		case tether.CodeForbidden:
			w.Header().Set("Producer-Epoch", strconv.FormatInt(pe.Epoch, 10))
		case tether.CodeConflict:
			w.Header().Set("Producer-Expected-Seq", strconv.FormatInt(pe.ExpectedSeq, 10))
			w.Header().Set("Producer-Received-Seq", strconv.FormatInt(pe.ReceivedSeq, 10))
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if res.Producer != nil {
		w.Header().Set("Producer-Epoch", strconv.FormatInt(res.Producer.Epoch, 10))
		w.Header().Set("Producer-Seq", strconv.FormatInt(res.Producer.Seq, 10))
	}
	if res.Duplicate {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(appendAnswer(make([]byte, 0, 128), res))
}

// appendAnswer appends the JSON of an append's answer, and the newline
// writeJSON ends it with, to dst: the same bytes as json.Marshal, without
// its reflection, on the path of every append.
func appendAnswer(dst []byte, res *engine.AppendResult) []byte {
	if !plainJSON(string(res.NextOffset)) {
		b, _ := json.Marshal(res) // no offset needs this; kept for safety
		return append(append(dst, b...), '\n')
	}
	dst = append(dst, `{"next_offset":"`...)
	dst = append(dst, res.NextOffset...)
	dst = append(dst, `","lease_expires_at":`...)
	if res.LeaseExpiresAt.IsZero() {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '"')
		dst = res.LeaseExpiresAt.UTC().AppendFormat(dst, tether.TimeLayout)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"cancel_requested":`...)
	dst = strconv.AppendBool(dst, res.CancelRequested)
	return append(dst, "}\n"...)
}

// plainJSON reports whether s is written in a JSON string as it is.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// holder is who appends or heartbeats: the lease token, under the key the
// request came with (the lease must have been claimed with it).
func holder(r *http.Request) engine.Holder {
	return engine.Holder{Token: r.Header.Get("Tether-Lease"), KeyID: keyOf(r).id}
}

// producerOf reads the Producer-Id, Producer-Epoch and Producer-Seq
// headers: all three or none.
func producerOf(r *http.Request) (*engine.Producer, error) {
	id, epoch, seq := r.Header.Get("Producer-Id"), r.Header.Get("Producer-Epoch"), r.Header.Get("Producer-Seq")
	if id == "" && epoch == "" && seq == "" {
		return nil, nil
	}
	if id == "" || epoch == "" || seq == "" {
		return nil, tether.Errorf(tether.CodeBadRequest, "Producer-Id, Producer-Epoch and Producer-Seq go together: send all three or none")
	}
	p := &engine.Producer{ID: id}
	var err error
	if p.Epoch, err = producerNumber(epoch); err != nil {
		return nil, tether.Errorf(tether.CodeBadRequest, "Producer-Epoch must be an integer from 0 to 2^53-1")
	}
	if p.Seq, err = producerNumber(seq); err != nil {
		return nil, tether.Errorf(tether.CodeBadRequest, "Producer-Seq must be an integer from 0 to 2^53-1")
	}
	return p, p.Check()
}

// producerNumber parses a decimal integer from 0 to 2^53-1, without sign
// or leading zeros.
func producerNumber(s string) (int64, error) {
	if s == "" || len(s) > 16 || (len(s) > 1 && s[0] == '0') {
		return 0, strconv.ErrSyntax
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, strconv.ErrSyntax
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > engine.MaxProducerNumber {
		return 0, strconv.ErrRange
	}
	return n, nil
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) {
	if err := decodeJSON(r, s.opts.MaxBodyBytes, &struct{}{}, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.e.Heartbeat(r.Context(), r.PathValue("rid"), holder(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// maxWait is a wait a client asked for in milliseconds (a long poll's
// ?wait=, a claim's wait_ms; not negative), capped at Options.MaxWait. It
// is capped in milliseconds, before it becomes a Duration: a wait whose
// nanoseconds do not fit in one (from about 107 days) would wrap around,
// to no wait at all.
func (s *Server) maxWait(ms int64) time.Duration {
	if ms >= s.opts.MaxWait.Milliseconds() {
		return s.opts.MaxWait
	}
	return time.Duration(ms) * time.Millisecond
}
