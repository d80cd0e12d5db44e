package api

import (
	"context"
	"net/http"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agui"
	"github.com/tetherhq/tether/engine"
)

// AG-UI (docs/ag-ui.md): a run request answered with the run's AG-UI
// stream, and streams that join a thread or a run mid-flight. All of it is
// the projection (package agui) of the engine's subscriptions: nothing is
// written but what the Tether routes write (a thread, a run, an answer).

// aguiRun serves POST /v1/ag-ui/{agent}: a RunAgentInput, answered with
// the AG-UI stream of one AG-UI run. threadId is the thread (created if
// missing); runId the run's Idempotency-Key (a retried request streams the
// same run from its start); resume[] answers the thread's waiting run,
// whose next AG-UI run the stream then shows.
func (s *Server) aguiRun(w http.ResponseWriter, r *http.Request) {
	b, err := readBody(r, s.opts.MaxBodyBytes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	in, err := agui.ParseRunAgentInput(b)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	p := principalOf(r)
	a := actRun
	if len(in.Resume) > 0 {
		a = actAnswer
	}
	if err := s.allowCreate(ctx, p, a, in.ThreadID); err != nil {
		s.writeError(w, r, err)
		return
	}
	snap, err := s.chatThread(ctx, p, in.ThreadID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	isNew := snap == nil
	if isNew {
		snap = &tether.Snapshot{} // made once the run is known to be valid
	}
	if len(in.Resume) > 0 {
		s.aguiResume(w, r, in, snap)
		return
	}
	msgs, err := in.NewMessages(agui.Known(snap))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	meta := in.RunMetadata()
	if len(meta) > engine.MaxMetadataBytes {
		// The run's metadata is the request's own fields: name them, not
		// "metadata", which an AG-UI client never sent.
		s.writeError(w, r, tether.Errorf(tether.CodeBadRequest,
			"the request's tools, context and forwardedProps are kept in the run's metadata: %d bytes of JSON, over the limit of %d",
			len(meta), engine.MaxMetadataBytes))
		return
	}
	// A state the front end changed becomes the thread's with the run
	// (one append: a refused request changes nothing), so the agent
	// starts with it, as AG-UI has the client's state be the agent's input.
	run := engine.RunRequest{
		Agent: r.PathValue("agent"), Input: tether.RunInput{Messages: msgs},
		Metadata: meta, IdempotencyKey: in.RunID, State: in.NewState(snap.State),
	}
	if isNew {
		if err := s.e.CheckRunRequest(ctx, run); err != nil {
			s.writeError(w, r, err)
			return
		}
		if _, err := s.createChatThread(ctx, p, a, in.ThreadID); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	rc, err := s.e.CreateRun(ctx, in.ThreadID, run)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cursor := rc.Before
	if !rc.Created {
		cursor = tether.OffsetStart // a retried request: the run from its start
	}
	w.Header().Set("Content-Location", "/v1/runs/"+rc.Run.ID)
	s.aguiStream(w, r, aguiReq{
		sub:  engine.SubscribeRequest{RunID: rc.Run.ID, Cursor: cursor},
		proj: agui.New(in.ThreadID, agui.Options{Run: rc.Run.ID}),
		once: true, runID: in.RunID,
	})
}

// aguiThreadEvents serves GET /v1/ag-ui/threads/{tid}/events: the thread as
// AG-UI, every run in turn, open until the client leaves.
func (s *Server) aguiThreadEvents(w http.ResponseWriter, r *http.Request) {
	s.aguiJoin(w, r, r.PathValue("tid"), "", false)
}

// aguiRunEvents serves GET /v1/ag-ui/threads/{tid}/runs/{rid}/events: one
// AG-UI run of a run ("current": the thread's running or waiting run,
// else its latest), ending with it.
func (s *Server) aguiRunEvents(w http.ResponseWriter, r *http.Request) {
	s.aguiJoin(w, r, r.PathValue("tid"), r.PathValue("rid"), true)
}

// aguiCancel answers POST …/threads/{tid}/runs/{rid}/cancel: a stop
// button's request (TetherAgent.cancelRun), {rid} a run of the thread or
// current. A stop pressed before the first run made the thread has none to
// end (204).
func (s *Server) aguiCancel(w http.ResponseWriter, r *http.Request) {
	s.stopRun(w, r, r.PathValue("tid"), r.PathValue("rid"))
}

// aguiJoin serves a join: without a cursor the join prelude, then what
// follows; from a cursor every frame after it ("now": from the tail, "-1":
// the whole log). A cursor that cannot be placed in the log gets the
// prelude, as a Tether stream gets a reset snapshot.
func (s *Server) aguiJoin(w http.ResponseWriter, r *http.Request, tid, rid string, once bool) {
	if err := singleParams(r, "after"); err != nil {
		s.writeError(w, r, err)
		return
	}
	cursor := r.Header.Get("Last-Event-ID")
	if cursor == "" {
		cursor = r.URL.Query().Get("after")
	}
	after, err := tether.ParseCursor(cursor)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	req := aguiReq{once: once}
	replay := func(snap *tether.Snapshot) {
		// The projection's state at the cursor is a fold of the log up to
		// it (aguiFold); the stream sends what comes after the cursor.
		if rid, err = s.currentRun(ctx, tid, rid, snap); err != nil || (rid == "" && once) {
			return
		}
		req.proj = agui.New(tid, agui.Options{Run: rid})
		if after != tether.OffsetStart {
			if err = s.aguiFold(ctx, req.proj, tid, rid, after); err != nil {
				return
			}
		}
		req.sub = engine.SubscribeRequest{ThreadID: tid, RunID: rid, Cursor: after}
	}
	switch after {
	case tether.OffsetStart:
		replay(nil)
	default:
		// From a snapshot ("", "now"), or checking that the cursor is an
		// event of the log (else a reset snapshot).
		probe := engine.SubscribeRequest{ThreadID: tid, Cursor: after}
		if after == tether.OffsetNow {
			probe.Cursor = ""
		}
		var sub *engine.Subscription
		if sub, err = s.subscribe(ctx, probe); err != nil {
			break
		}
		if sub.Snapshot == nil {
			sub.Close()
			replay(nil)
			break
		}
		if rid, err = s.currentRun(ctx, tid, rid, sub.Snapshot); err != nil {
			sub.Close()
			break
		}
		req.started = sub
		req.proj = agui.New(tid, agui.Options{Run: rid})
		if after == tether.OffsetNow {
			req.proj.Load(sub.Snapshot)
			// Nothing of a run that ended follows the tail: its stream
			// ends at once, as from a cursor at or after its end.
			req.ended = once && runEnded(sub.Snapshot, rid)
		} else {
			req.prelude = req.proj.Join(sub.Snapshot)
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if rid == "" && once {
		if req.started != nil {
			req.started.Close()
		}
		w.WriteHeader(http.StatusNoContent) // a thread without runs: nothing to join
		return
	}
	if req.proj == nil {
		req.proj = agui.New(tid, agui.Options{Run: rid})
	}
	s.aguiStream(w, r, req)
}

// aguiFold feeds p the log of thread tid (of run rid only, if set) up to
// and including offset after, dropping its frames: the state a join from
// after continues from. The log is read from the store a page at a time,
// before the stream subscribes from the cursor: read through the stream's
// subscription, it took in what was appended meanwhile and, on a long
// log, was cut as too slow before it reached the cursor, and again at
// each join from that cursor.
func (s *Server) aguiFold(ctx context.Context, p *agui.Projector, tid, rid string, after tether.Offset) error {
	return s.eachEvent(ctx, tid, rid, after, func(rec *tether.Record) error {
		ev, err := rec.Decode()
		if err != nil {
			return err
		}
		p.Event(ev)
		return nil
	})
}

// eachEvent calls fn with each record of thread tid's log (of run rid
// only, if set) up to and including offset upto, reading it from the
// store a page at a time.
func (s *Server) eachEvent(ctx context.Context, tid, rid string, upto tether.Offset, fn func(*tether.Record) error) error {
	for from := tether.OffsetStart; ; {
		recs, more, err := s.e.ReadLog(ctx, tid, from, foldPage)
		if tether.CodeOf(err) == tether.CodeBadRequest {
			// An offset just read is no longer in the log.
			return tether.Errorf(tether.CodeNotFound, "thread %s was deleted", tid)
		}
		if err != nil {
			return err
		}
		for _, rec := range recs {
			if rec.Offset.After(upto) {
				return nil
			}
			if rid != "" && rec.RunID != rid {
				continue
			}
			if err := fn(rec); err != nil {
				return err
			}
		}
		if !more || len(recs) == 0 {
			return nil
		}
		from = recs[len(recs)-1].Offset
	}
}

// runEnded reports whether run rid of snap has ended for good (done,
// error, cancelled, aborted).
func runEnded(snap *tether.Snapshot, rid string) bool {
	for _, r := range snap.Runs {
		if r.ID == rid {
			return r.Status.Terminal()
		}
	}
	return false
}

// currentRun resolves the run a run route names: "current" is the thread's
// running or waiting run, else its latest ("" if it has none); another
// name must be a run of the thread. Other routes name none. snap is read
// if nil.
func (s *Server) currentRun(ctx context.Context, tid, rid string, snap *tether.Snapshot) (string, error) {
	if rid == "" {
		return "", nil
	}
	if snap == nil {
		var err error
		if snap, err = s.e.Thread(ctx, tid); err != nil {
			return "", err
		}
	}
	if rid == "current" {
		return agui.CurrentRun(snap), nil
	}
	for _, r := range snap.Runs {
		if r.ID == rid {
			return rid, nil
		}
	}
	return "", tether.Errorf(tether.CodeNotFound, "run %s not found in thread %s", rid, tid)
}
