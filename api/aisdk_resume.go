package api

import (
	"context"
	"errors"
	"net/http"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/aisdk"
	"github.com/tetherhq/tether/engine"
)

// The AI SDK's resume (GET /v1/ai-sdk/{agent}/chat/{chat}/stream): the
// forms useChat and TetherChatTransport ask, and the fold of a run up to
// a cursor they resume from. See docs/ai-sdk.md, "Resume with each
// transport".

// aisdkResume answers GET …/chat/{chat}/stream: without a cursor (what
// useChat sends on mount), the active run's UI message rebuilt from its
// snapshot, then live, or 204 when no run is active; with ?run_id= and
// ?after= (what TetherChatTransport sends after a drop), the run's chunks
// after that offset, exactly; with ?run_id= alone, that run rebuilt.
func (s *Server) aisdkResume(w http.ResponseWriter, r *http.Request) {
	if err := singleParams(r, "after", "run_id"); err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	threadID := r.PathValue("chat")
	after, runID := q.Get("after"), q.Get("run_id")
	if after == "" && runID == "" {
		th, err := s.e.Thread(r.Context(), threadID)
		if errors.Is(err, tether.ErrNotFound) || err == nil && !principalOf(r).sees(th.Thread.Owner, threadID) {
			// None yet, or (created since guard looked) not the user's.
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if th.Thread.ActiveRunID == "" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		s.aisdkFromSnapshot(w, r, th.Thread.ActiveRunID)
		return
	}
	if after == "" {
		// A run of this chat (a stream that dropped before its first
		// frame with an id): rebuilt from its snapshot.
		s.aisdkServe(w, r, engine.SubscribeRequest{ThreadID: threadID, RunID: runID}, func(sub *engine.Subscription) (*aisdk.Stream, []aisdk.Chunk, tether.Offset, error) {
			chunks, proj := aisdk.Prelude(sub.Snapshot)
			return proj, chunks, sub.Snapshot.Offset, nil
		})
		return
	}
	cursor, err := tether.ParseCursor(after)
	switch {
	case err != nil:
	case cursor == tether.OffsetNow || (runID != "" && cursor == tether.OffsetStart):
		err = tether.Errorf(tether.CodeBadRequest, "after must be an offset of the chat's log")
	case runID == "" && q.Has("run_id"):
		// run_id= names no run (a client that could not read the
		// stream's Content-Location): not the form without it.
		err = tether.Errorf(tether.CodeBadRequest, "run_id must be the id of a run of the chat")
	case runID == "":
		s.aisdkSince(w, r, threadID, cursor)
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The run is folded up to the cursor before the stream subscribes
	// from it, so that the stream's subscription takes in nothing while
	// the fold reads (aisdkFold).
	if err := s.allow(r.Context(), principalOf(r), actRead, threadID); err != nil {
		s.writeError(w, r, err)
		return
	}
	gone := offsetGone(cursor, threadID)
	proj, err := s.aisdkFold(r.Context(), threadID, runID, cursor, gone)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.aisdkServe(w, r, engine.SubscribeRequest{ThreadID: threadID, RunID: runID, Cursor: cursor}, func(sub *engine.Subscription) (*aisdk.Stream, []aisdk.Chunk, tether.Offset, error) {
		if sub.Snapshot != nil {
			return nil, nil, "", gone // the chat changed since the fold
		}
		return proj, nil, "", nil
	})
}

// aisdkSince answers GET …/chat/{chat}/stream?after=<offset> (without
// run_id): the chat brought up to date for a page that loaded its
// messages as of that offset (their Tether-Offset). The active run is
// rebuilt from its snapshot, then live, as without a cursor; with none
// active, the chat's last run is, if a run appended since the offset:
// the answer the page loaded partly may have ended meanwhile, and told
// 204, the page would keep the part as the whole. 204 when no run
// appended since.
func (s *Server) aisdkSince(w http.ResponseWriter, r *http.Request, threadID string, after tether.Offset) {
	ctx := r.Context()
	err := s.allow(ctx, principalOf(r), actRead, threadID)
	if tether.CodeOf(err) == tether.CodeNotFound {
		// None, or (as for the route without a cursor) not the user's.
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	gone := offsetGone(after, threadID)
	// One page after the offset, which also checks it is of this log;
	// more only while the log holds no run's event (a thread's own).
	for from := after; ; {
		recs, more, err := s.e.ReadLog(ctx, threadID, from, foldPage)
		switch {
		case errors.Is(err, tether.ErrNotFound):
			w.WriteHeader(http.StatusNoContent) // deleted meanwhile
			return
		case tether.CodeOf(err) == tether.CodeBadRequest:
			s.writeError(w, r, gone)
			return
		case err != nil:
			s.writeError(w, r, err)
			return
		}
		if from == after {
			// The offset is of this log. A run still going is streamed,
			// as without the offset, whether or not it appended since the
			// load (a page may load and resume between two of its events).
			if th, err := s.e.Thread(ctx, threadID); err == nil && th.Thread.ActiveRunID != "" {
				s.aisdkFromSnapshot(w, r, th.Thread.ActiveRunID)
				return
			}
		}
		for _, rec := range recs {
			if rec.RunID != "" {
				s.aisdkLastRun(w, r, threadID)
				return
			}
		}
		if !more {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		from = recs[len(recs)-1].Offset
	}
}

// aisdkLastRun streams the chat's active run, else its last, rebuilt from
// its snapshot (runs of a chat follow one another: the last is the one
// that appended last).
func (s *Server) aisdkLastRun(w http.ResponseWriter, r *http.Request, threadID string) {
	th, err := s.e.Thread(r.Context(), threadID)
	if errors.Is(err, tether.ErrNotFound) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	run := th.Thread.ActiveRunID
	if run == "" && len(th.Runs) > 0 {
		run = th.Runs[len(th.Runs)-1].ID
	}
	if run == "" {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.aisdkFromSnapshot(w, r, run)
}

// offsetGone is the answer to a resume from an offset that is not in the
// chat's log.
func offsetGone(o tether.Offset, threadID string) error {
	return tether.Errorf(tether.CodeGone, "offset %s is not in the log of chat %s (deleted and created again, or restored): load the chat again", o, threadID)
}

// foldPage is how many records aisdkFold and aguiFold read from the
// store at once (at most about a megabyte of them: engine.ReadLog).
const foldPage = 512

// aisdkFold returns a run's projection as of offset after, by folding the
// run's events up to it: the chunks that follow depend on what came
// before (which part is open), and the client holds that already. It
// answers gone if after is not an event of the chat's log.
//
// The log is read from the store a page at a time, at the fold's own
// pace: a subscription (of the hub) would take in what the run appends
// while the fold reads, and on a long run be cut as too slow; the client
// would resume, fold again and be cut again, without end.
func (s *Server) aisdkFold(ctx context.Context, threadID, runID string, after tether.Offset, gone error) (*aisdk.Stream, error) {
	var proj *aisdk.Stream
	seen := false // after is an event of the log
	for from := tether.OffsetStart; ; {
		recs, more, err := s.e.ReadLog(ctx, threadID, from, foldPage)
		if tether.CodeOf(err) == tether.CodeBadRequest {
			// An offset just read is no longer in the log: the chat
			// was deleted and created again meanwhile.
			return nil, gone
		}
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			seen = seen || rec.Offset == after
			past := rec.Offset.After(after)
			if past && seen && proj != nil {
				return proj, nil
			}
			if rec.RunID != runID || (past && proj != nil) {
				continue
			}
			ev, err := rec.Decode()
			if err != nil {
				return nil, err
			}
			if proj == nil {
				if ev.Type != tether.EventRunCreated || ev.Run == nil {
					return nil, tether.Errorf(tether.CodeInternal, "run %s starts with %s", runID, ev.Type)
				}
				// A cursor before the run (an earlier run's offset): the
				// projection starts at its run.created, which the live
				// subscription delivers.
				proj = aisdk.NewStream(*ev.Run)
			}
			if !past {
				proj.Event(ev)
			}
		}
		if !more {
			switch {
			case proj == nil:
				return nil, tether.Errorf(tether.CodeNotFound, "run %s not found", runID)
			case !seen:
				return nil, gone
			}
			return proj, nil
		}
		from = recs[len(recs)-1].Offset
	}
}
