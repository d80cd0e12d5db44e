package api

import (
	"errors"
	"io"
	"net/http"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/aisdk"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/hub"
)

// The AI SDK's routes (/v1/ai-sdk/{agent}/chat…): useChat's
// DefaultChatTransport pointed at Tether, unmodified. Each stream is the
// projection (package aisdk) of a run subscription; runs are created with
// engine.CreateRun like any other. See docs/ai-sdk.md.

// aisdkChat answers a chat request: it creates the thread if needed and a
// run (or answers a waiting run's request), and streams the run's UI
// message.
func (s *Server) aisdkChat(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r, s.opts.MaxBodyBytes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req, err := aisdk.DecodeChatRequest(body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	p := principalOf(r)
	// Seen, or new and the token may create it; whether it may run or
	// answer is known once the request is planned.
	if err := s.allowCreate(ctx, p, actRead, req.ID); err != nil {
		s.writeError(w, r, err)
		return
	}
	// The request is planned, and its run checked, before the thread is
	// created: a request refused for what it says leaves nothing behind.
	snap, err := s.chatThread(ctx, p, req.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	plan, run, err := s.aisdkPlan(r, req, snap)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if snap == nil {
		created, err := s.createChatThread(ctx, p, actRead, req.ID)
		if err == nil && !created {
			// Made meanwhile (another tab's first message): planned
			// again with what it holds.
			if snap, err = s.chatThread(ctx, p, req.ID); err == nil {
				plan, run, err = s.aisdkPlan(r, req, snap)
			}
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	if plan.Answer != nil {
		s.aisdkAnswer(w, r, plan.Answer)
		return
	}
	rc, err := s.e.CreateRun(ctx, req.ID, run)
	if tether.CodeOf(err) == tether.CodeRunActive {
		var again string
		if again, err = s.aisdkRunActive(r, req, err); again != "" {
			// A regenerate sent again: the run it made, as for a retry.
			s.aisdkFromSnapshot(w, r, again)
			return
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !rc.Created {
		// A retry: the run as it stands, then what follows.
		s.aisdkFromSnapshot(w, r, rc.Run.ID)
		return
	}
	s.aisdkServe(w, r, engine.SubscribeRequest{RunID: rc.Run.ID, Cursor: rc.Before}, func(sub *engine.Subscription) (*aisdk.Stream, []aisdk.Chunk, tether.Offset, error) {
		return aisdk.NewStream(rc.Run), nil, "", nil
	})
}

// aisdkRunActive says why a chat request that creates a run was refused
// as the chat has an active run (err), unless the request made that run:
// a regenerate sent again, whose key has changed with its run
// (aisdk.SentAgainKey), is answered with the run's id. Else, when the run
// waits for the answer to its request (a regenerate, or a message sent as
// the run asked), it says that the question is open and what to do; else
// err.
func (s *Server) aisdkRunActive(r *http.Request, req *aisdk.ChatRequest, err error) (string, error) {
	ctx := r.Context()
	snap, terr := s.e.Thread(ctx, req.ID)
	if terr != nil {
		return "", err
	}
	if key := aisdk.SentAgainKey(req, snap); key != "" {
		// The key made the active run: this request made it.
		if run, kerr := s.e.RunByKey(ctx, req.ID, key); kerr == nil && run.ID == snap.Thread.ActiveRunID {
			return run.ID, nil
		}
	}
	then := "send"
	if req.Trigger == aisdk.TriggerRegenerate {
		then = "regenerate"
	}
	if werr := aisdk.WaitingError(snap, then); werr != nil {
		return "", werr
	}
	return "", err
}

// aisdkPlan plans a chat request on the thread as it stands (snap, nil
// for one that does not exist yet): what it asks, whether the caller may
// ask it, and the run it creates, checked.
func (s *Server) aisdkPlan(r *http.Request, req *aisdk.ChatRequest, snap *tether.Snapshot) (*aisdk.Plan, engine.RunRequest, error) {
	plan, err := aisdk.PlanChat(req, snap)
	if err != nil {
		return nil, engine.RunRequest{}, err
	}
	a := actRun
	if plan.Answer != nil {
		a = actAnswer
	}
	if err := allowFlag(principalOf(r), a); err != nil {
		return nil, engine.RunRequest{}, err
	}
	run := engine.RunRequest{
		Agent: r.PathValue("agent"), Input: tether.RunInput{Messages: plan.Input},
		Metadata: plan.Metadata, IdempotencyKey: plan.Key,
	}
	if plan.Answer == nil && snap == nil {
		// A new thread's: its key is new too, so CreateRun would refuse
		// it only once the thread was made.
		err = s.e.CheckRunRequest(r.Context(), run)
	}
	return plan, run, err
}

// aisdkAnswer answers a waiting run's request and streams what follows:
// the client holds the message up to the request already, so the run is
// folded up to its run.waiting, and what came after (an agent may stream
// while it waits) is sent first.
func (s *Server) aisdkAnswer(w http.ResponseWriter, r *http.Request, a *aisdk.Answer) {
	s.aisdkServe(w, r, engine.SubscribeRequest{RunID: a.RunID, Cursor: tether.OffsetStart}, func(sub *engine.Subscription) (*aisdk.Stream, []aisdk.Chunk, tether.Offset, error) {
		var proj *aisdk.Stream
		var after []aisdk.Chunk
		var at tether.Offset
		found := false
		for {
			recs, err := sub.TryNext(r.Context())
			for _, rec := range recs {
				ev, derr := rec.Decode()
				if derr != nil {
					return nil, nil, "", derr
				}
				if proj == nil {
					if ev.Type != tether.EventRunCreated || ev.Run == nil {
						return nil, nil, "", tether.Errorf(tether.CodeInternal, "run %s starts with %s", a.RunID, ev.Type)
					}
					proj = aisdk.NewStream(*ev.Run)
				}
				c := proj.Event(ev)
				switch {
				case answers(a, ev):
					// An approval sent again names its call: the last
					// request that asked it is the one it answers.
					found, at, after = true, rec.Offset, nil
					a.RequestID = ev.Request.ID
				case found:
					after, at = append(after, c...), rec.Offset
				}
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, nil, "", err
			}
			if len(recs) == 0 || err != nil {
				break
			}
		}
		if !found && a.CallID != "" {
			return nil, nil, "", tether.Errorf(tether.CodeConflict, "run %s did not ask the approval of tool call %q", a.RunID, a.CallID)
		}
		if !found {
			return nil, nil, "", tether.Errorf(tether.CodeConflict, "run %s is not waiting on request %q", a.RunID, a.RequestID)
		}
		if _, err := s.e.SubmitInput(r.Context(), a.RunID, a.RequestID, a.Value); err != nil {
			return nil, nil, "", err
		}
		return proj, append([]aisdk.Chunk{{Type: aisdk.ChunkStart, MessageID: proj.MessageID()}}, after...), at, nil
	})
}

// answers reports whether ev is the run.waiting whose request a answers:
// its request, or (an approval sent again) one asking the approval of
// a's call.
func answers(a *aisdk.Answer, ev *tether.Event) bool {
	if ev.Type != tether.EventRunWaiting || ev.Request == nil {
		return false
	}
	if a.RequestID != "" && a.CallID == "" {
		return ev.Request.ID == a.RequestID
	}
	return tether.ApprovalCall(ev.Request) == a.CallID
}

// aisdkFromSnapshot streams a run's UI message rebuilt from its snapshot,
// then live.
func (s *Server) aisdkFromSnapshot(w http.ResponseWriter, r *http.Request, runID string) {
	s.aisdkServe(w, r, engine.SubscribeRequest{RunID: runID}, func(sub *engine.Subscription) (*aisdk.Stream, []aisdk.Chunk, tether.Offset, error) {
		chunks, proj := aisdk.Prelude(sub.Snapshot)
		return proj, chunks, sub.Snapshot.Offset, nil
	})
}

// aisdkStop answers POST …/chat/{chat}/stop: it cancels the chat's
// active run (202 with the run), or answers 204 when none is active, also
// for a chat that does not exist yet (a stop before the first answer), as
// the other chat routes answer a new chat.
func (s *Server) aisdkStop(w http.ResponseWriter, r *http.Request) {
	s.stopRun(w, r, r.PathValue("chat"), "current")
}

// aisdkMessages answers GET …/chat/{chat}/messages: the chat as
// useChat's messages ([] for a chat that does not exist yet).
func (s *Server) aisdkMessages(w http.ResponseWriter, r *http.Request) {
	snap, err := s.e.Thread(r.Context(), r.PathValue("chat"))
	if errors.Is(err, tether.ErrNotFound) || err == nil && !principalOf(r).sees(snap.Thread.Owner, snap.Thread.ID) {
		// None yet, or (created since guard looked) not the user's.
		writeJSON(w, http.StatusOK, []aisdk.UIMessage{})
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Tether-Offset", string(snap.Offset))
	writeJSON(w, http.StatusOK, aisdk.Messages(snap))
}

// aisdkServe subscribes to a run, sets up its projection (start, which
// returns it, the first chunks and the offset they are as of, or
// refuses), and writes the UI
// message stream until the projection's terminal chunk, the run's end,
// the client leaving or shutdown. Each event's chunks carry its offset
// on their last frame (id:), the cursor to resume from.
func (s *Server) aisdkServe(w http.ResponseWriter, r *http.Request, req engine.SubscribeRequest,
	start func(*engine.Subscription) (*aisdk.Stream, []aisdk.Chunk, tether.Offset, error)) {
	done, ok := s.live(w, r)
	if !ok {
		return
	}
	defer done()
	ctx := r.Context()
	p := principalOf(r)
	sub, err := s.subscribe(ctx, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer sub.Close()
	// The chat may not have existed when guard looked (aisdkResume).
	if err := s.allow(ctx, principalOf(r), actRead, sub.ThreadID); err != nil {
		s.writeError(w, r, err)
		return
	}
	proj, first, at, err := start(sub)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Vercel-AI-UI-Message-Stream", "v1")
	h.Set("Content-Location", "/v1/runs/"+sub.RunID)
	w.WriteHeader(http.StatusOK)
	s.metrics.streams.Inc()
	defer s.metrics.streams.Dec()

	rc := http.NewResponseController(w)
	var buf []byte
	flush := func() bool {
		if len(buf) == 0 {
			return true
		}
		_ = rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
		_, err := w.Write(buf)
		buf = buf[:0]
		return err == nil && rc.Flush() == nil
	}
	add := func(chunks []aisdk.Chunk, id tether.Offset) {
		for i, c := range chunks {
			var frameID string
			if i == len(chunks)-1 {
				frameID = string(id)
			}
			buf = aisdk.AppendFrame(buf, c, frameID)
		}
	}
	add(first, at)
	if !flush() || (len(first) > 0 && first[len(first)-1].Terminal()) {
		return
	}
	pinged := time.Now()
	for {
		recs, err := sub.TryNext(ctx)
		for _, rec := range recs {
			ev, derr := rec.Decode()
			if derr != nil {
				s.log.Warn("ai-sdk stream: undecodable event", "thread", sub.ThreadID, "offset", rec.Offset, "err", derr, "request_id", requestID(r))
				flush()
				panic(http.ErrAbortHandler) // mid-answer: not a clean end (below)
			}
			add(proj.Event(ev), rec.Offset)
			if proj.Ended() {
				flush()
				return
			}
		}
		if err != nil {
			flush()
			if errors.Is(err, io.EOF) || errors.Is(err, hub.ErrClosed) || ctx.Err() != nil {
				return // the run's end, the thread deleted, shutdown, or the client gone
			}
			// Cut mid-answer (a client too far behind, a failed read): the
			// default transport takes a clean end for the answer's end and
			// would keep the partial message as the whole, so the response
			// is aborted, an error the client sees as one, and resumes from.
			if errors.Is(err, hub.ErrSlow) {
				s.metrics.slowCuts.Inc()
			} else {
				s.log.Warn("ai-sdk stream ended", "thread", sub.ThreadID, "err", err, "request_id", requestID(r))
			}
			panic(http.ErrAbortHandler)
		}
		if len(recs) > 0 {
			if !flush() {
				return
			}
			// A stream far behind may catch up for long: neither
			// shutdown nor the token's exp waits for that (endDue).
			if s.endDue(time.Time{}, p) != "" {
				panic(http.ErrAbortHandler) // as at shutdown and on the beat, below
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-s.shutdown:
			// Mid-answer: a clean end would read as the answer's end to
			// the default transport (a deploy would leave every open page
			// with a cut answer shown as whole), so the response is
			// aborted; the client resumes, from another node or once the
			// server is back.
			flush()
			panic(http.ErrAbortHandler)
		case <-s.beat.next():
			if s.lapsed(p) {
				// The token expired. A clean end would read as the
				// answer's end to the default transport, so the response
				// is aborted, an error the client sees as one; it resumes
				// (GET …/stream) with a fresh token.
				flush()
				panic(http.ErrAbortHandler)
			}
			if time.Since(pinged) >= s.opts.Heartbeat {
				// A comment: the AI SDK's parser skips it; it keeps
				// proxies from idling the stream out.
				pinged = time.Now()
				buf = append(buf, ":ping\n\n"...)
				if !flush() {
					return
				}
			}
		case <-sub.Ready():
		}
	}
}
