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
	q := r.URL.Query()
	req.MessageID = q.Get("message_id")
	if t := q.Get("types"); t != "" {
		req.Types = strings.Split(t, ",")
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

// stream serves a subscription as Server-Sent Events. Frames, in order:
// the ":ok" comment, connected, the snapshot when due, then events, with a
// ping every heartbeat. It ends after a run's or message's terminal event,
// at the max lifetime, at shutdown (after a reconnect frame) or when the
// client falls too far behind; the client resumes from its last id.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, req engine.SubscribeRequest) {
	ctx := r.Context()
	sub, err := s.e.Subscribe(ctx, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer sub.Close()
	s.streams.Add(1)
	defer s.streams.Done()
	s.metrics.streams.Inc()
	defer s.metrics.streams.Dec()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	flush := func() bool {
		_ = rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
		return rc.Flush() == nil
	}
	if _, err := io.WriteString(w, ":ok\n\n"); err != nil || !flush() {
		return
	}

	var b frameBuf
	b.event("connected", "", jsonOf(connected{
		ThreadID: sub.ThreadID, RunID: sub.RunID, MessageID: sub.MessageID, Offset: sub.Tail,
		HeartbeatMs: s.opts.Heartbeat.Milliseconds(), ServerTime: tether.Now(),
	}))
	if sub.Snapshot != nil {
		b.event("snapshot", string(sub.Snapshot.Offset), jsonOf(sub.Snapshot))
	}
	if sub.Done() {
		b.event("end", "", endOf(sub))
	}
	if !b.flushTo(w) || !flush() || sub.Done() {
		return
	}

	ping := time.NewTicker(s.opts.Heartbeat)
	defer ping.Stop()
	life := time.NewTimer(s.opts.MaxStreamLifetime)
	defer life.Stop()
	for {
		// Write everything that is ready (history is read a page at a
		// time), then flush once: one syscall for many events.
		recs, err := sub.TryNext(ctx)
		for _, rec := range recs {
			b.raw(rec.SSE())
		}
		if err != nil {
			switch {
			case errors.Is(err, hub.ErrSlow):
				s.metrics.slowCuts.Inc()
				b.event("reconnect", "", `{"reason":"slow_consumer"}`)
			case errors.Is(err, io.EOF):
				b.event("end", "", endOf(sub))
			case errors.Is(err, hub.ErrClosed) && !s.stopped():
				b.event("end", "", `{"reason":"thread_deleted"}`)
			case !errors.Is(err, hub.ErrClosed) && ctx.Err() == nil:
				s.log.Warn("stream ended", "thread", sub.ThreadID, "err", err, "request_id", requestID(r))
			}
			b.flushTo(w)
			flush()
			return
		}
		if len(recs) > 0 {
			if !b.flushTo(w) || !flush() {
				return
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-s.shutdown:
			b.event("reconnect", "", `{"reason":"shutdown"}`)
			b.flushTo(w)
			flush()
			return
		case <-life.C:
			b.event("reconnect", "", `{"reason":"max_lifetime"}`)
			b.flushTo(w)
			flush()
			return
		case <-ping.C:
			b.event("ping", "", `{"ts":"`+tether.Now().Format(tether.TimeLayout)+`"}`)
			if !b.flushTo(w) || !flush() {
				return
			}
		case <-sub.Ready():
		}
	}
}

// endOf is the data of the end frame of a run or message subscription.
func endOf(sub *engine.Subscription) string {
	if sub.MessageID != "" {
		return `{"reason":"message_finished"}`
	}
	return `{"reason":"run_finished"}`
}

type connected struct {
	ThreadID    string        `json:"thread_id"`
	RunID       string        `json:"run_id,omitempty"`
	MessageID   string        `json:"message_id,omitempty"`
	Offset      tether.Offset `json:"offset"`
	HeartbeatMs int64         `json:"heartbeat_ms"`
	ServerTime  tether.Time   `json:"server_time"`
}

// frameBuf collects SSE frames until the next flush.
type frameBuf struct{ buf []byte }

func (f *frameBuf) event(name, id, data string) {
	if id != "" {
		f.buf = append(f.buf, "id: "...)
		f.buf = append(f.buf, id...)
		f.buf = append(f.buf, '\n')
	}
	f.buf = append(f.buf, "event: "...)
	f.buf = append(f.buf, name...)
	f.buf = append(f.buf, "\ndata: "...)
	f.buf = append(f.buf, data...)
	f.buf = append(f.buf, "\n\n"...)
}

// raw adds a prebuilt frame. Large frames are written directly rather than
// copied, in order.
func (f *frameBuf) raw(frame []byte) { f.buf = append(f.buf, frame...) }

func (f *frameBuf) flushTo(w io.Writer) bool {
	if len(f.buf) == 0 {
		return true
	}
	_, err := w.Write(f.buf)
	if cap(f.buf) > 64<<10 {
		f.buf = nil // don't keep a large buffer for an idle stream
	} else {
		f.buf = f.buf[:0]
	}
	return err == nil
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
		wait = min(time.Duration(ms)*time.Millisecond, s.opts.MaxWait)
	}
	if req.Cursor == "" {
		req.Cursor = tether.OffsetStart
	}
	ctx := r.Context()
	sub, err := s.e.Subscribe(ctx, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer sub.Close()

	recs, err := sub.TryNext(ctx)
	if err == nil && len(recs) == 0 && wait > 0 && !sub.Done() {
		wctx, cancel := s.untilShutdown(ctx, wait)
		recs, err = sub.Next(wctx)
		cancel()
		if wctx.Err() != nil && ctx.Err() == nil {
			err = nil // the wait ended (or the server is stopping): answer with what there is
		}
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

// jsonRaw is pre-encoded JSON.
type jsonRaw []byte

func (j jsonRaw) MarshalJSON() ([]byte, error) { return j, nil }
