package api

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/tetherhq/tether/agui"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/hub"
)

// aguiReq says what an AG-UI stream serves.
type aguiReq struct {
	// sub is the subscription to start, unless started is set.
	sub     engine.SubscribeRequest
	started *engine.Subscription
	proj    *agui.Projector
	prelude []agui.Frame
	// once ends the stream after the first AG-UI run's end (RUN_FINISHED
	// with any outcome, or RUN_ERROR).
	once bool
	// ended, with once, says that run ended before the stream starts
	// (a join from the tail): it ends right after ":ok".
	ended bool
	// runID, if set, is the runId of the AG-UI run a POST serves: the
	// client's.
	runID string
}

// aguiStream writes an AG-UI stream: "data: <event>" frames (each with its
// Tether offset in metadata.tether, and an id line on the last frame of a
// Tether event), comments as heartbeats (":ok" first), nothing else: an
// AG-UI client parses every data line as an event.
//
// It ends cleanly only where AG-UI has an end: after the AG-UI run it
// serves (once), or after the thread was deleted (with RUN_ERROR if a run
// was open). A stream the server cuts otherwise (shutdown, max lifetime, a
// client too far behind, a failed read) is reset, never closed cleanly:
// HttpAgent takes a clean close without RUN_FINISHED for success, and a
// reset for the error it is. Clients join again (docs/ag-ui.md).
func (s *Server) aguiStream(w http.ResponseWriter, r *http.Request, req aguiReq) {
	done, ok := s.live(w, r)
	if !ok {
		if req.started != nil {
			req.started.Close()
		}
		return
	}
	sub := req.started
	if sub == nil {
		var err error
		if sub, err = s.subscribe(r.Context(), req.sub); err != nil {
			done()
			s.writeError(w, r, err)
			return
		}
	}
	st := &aguiWriter{s: s, sub: sub, req: req, reqID: requestID(r), done: done, p: principalOf(r), ended: req.ended}
	s.metrics.streams.Inc()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no")
	if r.ProtoMajor == 1 {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			st.conn = conn
			st.out = &connOut{conn: conn, timeout: s.opts.WriteTimeout}
			st.f.add(responseHead(h))
			st.start()
			ctx, cancel := context.WithCancel(context.Background())
			st.unwatch = watchLeave(conn, cancel)
			go func() {
				defer st.finish()
				defer cancel()
				st.run(ctx)
			}()
			return
		}
	}
	w.WriteHeader(http.StatusOK)
	st.out = &httpOut{w: w, rc: http.NewResponseController(w), timeout: s.opts.WriteTimeout}
	defer st.finish()
	st.start()
	st.run(r.Context())
	if st.reset {
		// net/http ends the response without its last chunk (HTTP/1.1) or
		// with RST_STREAM (HTTP/2): the client sees a broken stream.
		panic(http.ErrAbortHandler)
	}
}

// aguiWriter is one AG-UI stream being written.
type aguiWriter struct {
	s       *Server
	sub     *engine.Subscription
	req     aguiReq
	out     sseOut
	conn    net.Conn // a taken-over connection, reset by finish if reset is set
	reqID   string
	f       frames
	done    func()
	unwatch func()
	p       Principal // who opened it: the stream is cut at its token's exp, or once a reload removed its key
	ended   bool      // once: the AG-UI run served has ended
	reset   bool      // the server cut the stream: reset, not closed cleanly
}

var pingComment = []byte(": ping\n\n")

func (st *aguiWriter) finish() {
	if st.unwatch != nil {
		st.unwatch()
		st.unwatch = nil
	}
	st.sub.Close()
	if st.reset && st.conn != nil {
		resetConn(st.conn)
	}
	st.out.close()
	st.s.metrics.streams.Dec()
	st.done()
}

// resetConn makes the close of conn a TCP reset (SO_LINGER 0): the client
// reads an error, not the end of the response.
func resetConn(conn net.Conn) {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
}

// start queues the ":ok" comment and the prelude.
func (st *aguiWriter) start() {
	st.f.add(okComment)
	st.add(st.req.prelude)
}

// add queues frames, and reports whether the stream goes on (once: not
// past the end of the AG-UI run it serves).
func (st *aguiWriter) add(frames []agui.Frame) bool {
	for _, fr := range frames {
		if st.ended {
			return false
		}
		switch t := fr.Event.Type(); {
		case t == agui.RunStarted:
			if st.req.runID != "" {
				fr.Event["runId"] = st.req.runID
			}
		case fr.Terminal():
			st.ended = st.req.once
			if st.req.runID != "" && t == agui.RunFinished {
				fr.Event["runId"] = st.req.runID
			}
		}
		st.f.add(fr.SSE())
	}
	return !st.ended
}

// run writes the stream until it ends.
func (st *aguiWriter) run(ctx context.Context) {
	s, sub := st.s, st.sub
	if !st.send() || st.ended {
		return
	}
	started := time.Now()
	pinged := started
	for {
		recs, err := sub.TryNext(ctx)
		for _, rec := range recs {
			e, derr := rec.Decode()
			if derr != nil {
				s.log.Error("ag-ui: undecodable event", "thread", sub.ThreadID, "offset", rec.Offset, "request_id", st.reqID)
				st.cut()
				return
			}
			if !st.add(st.req.proj.Event(e)) {
				st.send()
				return
			}
		}
		if err != nil {
			switch {
			case errors.Is(err, io.EOF):
				// A run subscription past its run's end: nothing more.
			case errors.Is(err, hub.ErrClosed) && !s.stopped():
				// The projector knows whether the client has a run open,
				// also one whose RUN_STARTED this stream did not send (a
				// join from a cursor or from the tail, mid-run).
				if st.req.proj.RunOpen() {
					st.f.add(agui.Frame{Event: agui.Event{"type": agui.RunError, "code": "thread_deleted",
						"message": "The thread was deleted."}, Offset: sub.Scanned(), Last: true}.SSE())
				}
			default:
				if errors.Is(err, hub.ErrSlow) {
					s.metrics.slowCuts.Inc()
				} else if !errors.Is(err, hub.ErrClosed) && ctx.Err() == nil {
					s.log.Warn("ag-ui stream ended", "thread", sub.ThreadID, "err", err, "request_id", st.reqID)
				}
				st.cut()
				return
			}
			st.send()
			return
		}
		if len(recs) > 0 {
			if !st.send() {
				return
			}
			// A stream far behind may catch up for long, and one whose
			// thread is appended to without pause may never wait:
			// neither shutdown, its lifetime nor the token's exp waits
			// for the beat (endDue).
			if s.endDue(started, st.p) != "" {
				st.cut()
				return
			}
			continue
		}
		if st.unwatch != nil {
			st.unwatch()
			st.unwatch = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-s.shutdown:
			st.cut()
			return
		case <-s.beat.next():
			if s.endDue(started, st.p) != "" {
				st.cut()
				return
			}
			if s.beat.pingDue(&pinged, time.Now()) {
				st.f.add(pingComment)
				if !st.send() {
					return
				}
			}
		case <-sub.Ready():
		}
	}
}

// cut ends the stream with a reset: what was queued is sent first.
func (st *aguiWriter) cut() {
	st.send()
	st.reset = true
}

func (st *aguiWriter) send() bool {
	if len(st.f.bufs) == 0 {
		return true
	}
	all := st.f.bufs
	b := all
	err := st.out.send(&b)
	st.f.reset(all)
	return err == nil
}
