package api

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/hub"
)

func (s *Server) threadEvents(w http.ResponseWriter, r *http.Request) {
	s.events(w, r, engine.SubscribeRequest{ThreadID: r.PathValue("tid")})
}

func (s *Server) runEvents(w http.ResponseWriter, r *http.Request) {
	s.events(w, r, engine.SubscribeRequest{RunID: r.PathValue("rid")})
}

// events serves a subscription as SSE or, with Accept: application/json,
// as a JSON catch-up or long poll.
func (s *Server) events(w http.ResponseWriter, r *http.Request, req engine.SubscribeRequest) {
	if err := singleParams(r, "after", "message_id", "types", "wait"); err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	req.MessageID = q.Get("message_id")
	if t := q.Get("types"); t != "" {
		req.Types = strings.Split(t, ",")
		if err := checkTypes(req.Types); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	cursor := r.Header.Get("Last-Event-ID")
	if cursor == "" {
		cursor = q.Get("after")
	}
	var err error
	if req.Cursor, err = tether.ParseCursor(cursor); err != nil {
		s.writeError(w, r, err)
		return
	}
	if wantsJSON(r) {
		s.poll(w, r, req)
		return
	}
	s.stream(w, r, req)
}

// wantsJSON reports whether the client asked for JSON rather than SSE.
func wantsJSON(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "application/json":
			return true
		case "text/event-stream":
			return false
		}
	}
	return false
}

// createRunStream creates a run and answers with its SSE stream.
func (s *Server) createRunStream(w http.ResponseWriter, r *http.Request) {
	rc, err := s.newRun(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Location", "/v1/runs/"+rc.Run.ID)
	w.Header().Set("Location", "/v1/runs/"+rc.Run.ID+"/events")
	cursor := rc.Before
	if !rc.Created {
		cursor = tether.OffsetStart // a retried request: the run from its start
	}
	s.stream(w, r, engine.SubscribeRequest{RunID: rc.Run.ID, Cursor: cursor})
}

// poll serves a subscription as JSON: the events after the cursor (from
// the start without one), waiting up to ?wait= ms for the first if there
// are none.
func (s *Server) poll(w http.ResponseWriter, r *http.Request, req engine.SubscribeRequest) {
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 0 {
			s.writeError(w, r, tether.Errorf(tether.CodeBadRequest, "wait must be a number of milliseconds"))
			return
		}
		wait = s.maxWait(int64(ms))
	}
	if req.Cursor == "" {
		req.Cursor = tether.OffsetStart
	}
	if wait > 0 {
		release, ok := s.holdStream(w, r)
		if !ok {
			return
		}
		defer release()
	}
	ctx := r.Context()
	sub, err := s.e.Subscribe(ctx, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer sub.Close()

	recs, err := sub.TryNext(ctx)
	if err == nil && len(recs) == 0 && !sub.Done() && wait < catchUpWait && sub.Tip().After(sub.Scanned()) {
		// The thread's state is ahead of what reached this node's fan-out
		// (another node's commit, read from the store, whose notification
		// is on its way): wait for it rather than answer "not up to date"
		// with nothing.
		wait = catchUpWait
	}
	wait = s.untilExpiry(wait, principalOf(r).Expires)
	if err == nil && len(recs) == 0 && wait > 0 && !sub.Done() {
		wctx, cancel := s.untilShutdown(ctx, wait)
		recs, err = sub.Next(wctx)
		if err != nil && wctx.Err() != nil && ctx.Err() == nil {
			err = nil // the wait ended (or the server is stopping): answer with what there is
		}
		cancel() // after the check: once cancelled, wctx.Err() is set whatever ended the wait
	}
	if errors.Is(err, hub.ErrSlow) {
		// More came at once than a subscriber's buffer holds (one large
		// append): nothing is lost, the answer is not up to date and the
		// next poll reads the rest from the store.
		err = nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		if errors.Is(err, hub.ErrClosed) {
			err = tether.Errorf(tether.CodeNotFound, "thread %s not found", sub.ThreadID)
		}
		s.writeError(w, r, err)
		return
	}
	events := make([]jsonRaw, len(recs))
	for i, rec := range recs {
		events[i] = jsonRaw(rec.Data)
	}
	next := sub.Scanned()
	writeJSON(w, http.StatusOK, struct {
		Events   []jsonRaw        `json:"events"`
		Next     tether.Offset    `json:"next_offset"`
		UpToDate bool             `json:"up_to_date"`
		Done     bool             `json:"done,omitempty"`
		Snapshot *tether.Snapshot `json:"snapshot,omitempty"`
	}{events, next, sub.Done() || !sub.Tip().After(next), sub.Done(), sub.Snapshot})
}

// catchUpWait bounds how long a poll without wait waits for events the
// node knows are committed but has not been notified of yet.
const catchUpWait = 2 * time.Second

// jsonRaw is pre-encoded JSON.
type jsonRaw []byte

func (j jsonRaw) MarshalJSON() ([]byte, error) { return j, nil }
