package api

import (
	"context"
	"net/http"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agui"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/clip"
)

// An AG-UI resume[]: the answer to the request a run waits on, or the same
// answer sent again (HttpAgent repeats a POST with the same body), which
// streams what the first POST got and appends nothing.

// aguiResume answers the thread's waiting run with resume[] and streams
// the AG-UI run that the answer starts (or, for a cancelled answer to a
// request that is not an AG-UI interrupt, the run's end). A resume[] that
// does not answer the open request may be one sent again (aguiResumeAgain).
func (s *Server) aguiResume(w http.ResponseWriter, r *http.Request, in *agui.RunAgentInput, snap *tether.Snapshot) {
	var run *tether.Run
	for i := range snap.Runs {
		if snap.Runs[i].Status == tether.RunWaiting && snap.Runs[i].Request != nil {
			run = &snap.Runs[i]
		}
	}
	if run == nil {
		s.aguiResumeAgain(w, r, in, snap, nil)
		return
	}
	ans, err := agui.ResumeAnswer(run.Request, in.Resume)
	if tether.CodeOf(err) == tether.CodeConflict {
		// Not an answer to the open request: perhaps the answer to one
		// before it, whose POST's answer was lost.
		s.aguiResumeAgain(w, r, in, snap, err)
		return
	}
	if err == nil {
		err = s.aguiAnswer(r.Context(), run.ID, run.Request.ID, ans)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// What follows the snapshot is the answer and the run going on: the
	// projector picks up from the snapshot, as the stream did.
	proj := agui.New(in.ThreadID, agui.Options{Run: run.ID})
	proj.Load(snap)
	w.Header().Set("Content-Location", "/v1/runs/"+run.ID)
	s.aguiStream(w, r, aguiReq{
		sub:  engine.SubscribeRequest{RunID: run.ID, Cursor: snap.Offset},
		proj: proj, once: true, runID: in.RunID,
	})
}

// aguiAnswer gives run's request requestID the answer ans: its value, or
// the run's cancel.
func (s *Server) aguiAnswer(ctx context.Context, runID, requestID string, ans *agui.Answer) error {
	var err error
	if ans.Cancel {
		_, err = s.e.CancelRun(ctx, runID)
	} else {
		_, err = s.e.SubmitInput(ctx, runID, requestID, ans.Value)
	}
	return err
}

// aguiResumeAgain serves a resume[] sent again (its POST's answer was
// lost), when no run waits or while the run waits on a later request: if
// the thread's waiting run, else its last, asked a request that resume[]
// answers, and took that answer (the engine's to say: the same answer to
// an answered request is that answer, another a conflict), the stream is
// the one the first POST got, from the request on. Nothing is appended.
// open is why resume[] does not answer the request the run waits on, the
// answer when it answers none before either (nil: no run waits).
func (s *Server) aguiResumeAgain(w http.ResponseWriter, r *http.Request, in *agui.RunAgentInput, snap *tether.Snapshot, open error) {
	refused := open
	if refused == nil {
		refused = tether.Errorf(tether.CodeConflict, "thread %s has no run waiting for input", in.ThreadID)
	}
	if len(snap.Runs) == 0 {
		s.writeError(w, r, refused)
		return
	}
	ctx := r.Context()
	run := snap.Runs[len(snap.Runs)-1]
	for _, sr := range snap.Runs {
		if sr.Status == tether.RunWaiting {
			run = sr
		}
	}
	asked, err := s.requestAnswered(ctx, in.ThreadID, run.ID, snap.Offset, in.Resume)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if asked.req == nil {
		s.writeError(w, r, refused)
		return
	}
	ans, err := agui.ResumeAnswer(asked.req, in.Resume)
	switch {
	case err != nil:
	case ans.Cancel:
		// The run's cancel was this answer only if the request took no
		// other and the run was stopped: else a cancel now would stop a
		// run that went on with another answer.
		if asked.input || (run.CancelRequestedAt.IsZero() && run.Status != tether.RunCancelled) {
			err = tether.Errorf(tether.CodeConflict, "request %q of run %s was not answered with a cancel", clip.ID(asked.req.ID), run.ID)
		}
	default:
		err = s.aguiAnswer(ctx, run.ID, asked.req.ID, ans)
	}
	if err != nil {
		if tether.CodeOf(err) == tether.CodeConflict && open == nil {
			err = refused
		}
		s.writeError(w, r, err)
		return
	}
	proj := agui.New(in.ThreadID, agui.Options{Run: run.ID})
	if err := s.aguiFold(ctx, proj, in.ThreadID, run.ID, asked.at); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Location", "/v1/runs/"+run.ID)
	s.aguiStream(w, r, aguiReq{
		sub:  engine.SubscribeRequest{RunID: run.ID, Cursor: asked.at},
		proj: proj, once: true, runID: in.RunID,
	})
}

// askedRequest is a request a run made: the offset of its run.waiting,
// and whether a run.input answered it.
type askedRequest struct {
	req   *tether.Request
	at    tether.Offset
	input bool
}

// requestAnswered returns the last request run rid of thread tid made up
// to offset upto that resume answers (agui.ResumeAnswer); req is nil if
// it made none.
func (s *Server) requestAnswered(ctx context.Context, tid, rid string, upto tether.Offset, resume []agui.ResumeEntry) (askedRequest, error) {
	var asked askedRequest
	err := s.eachEvent(ctx, tid, rid, upto, func(rec *tether.Record) error {
		if rec.Type != tether.EventRunWaiting && rec.Type != tether.EventRunInput {
			return nil
		}
		ev, err := rec.Decode()
		if err != nil {
			return err
		}
		switch {
		case ev.Type == tether.EventRunInput:
			asked.input = asked.input || asked.req != nil && ev.RequestID == asked.req.ID
		case ev.Request != nil:
			if _, err := agui.ResumeAnswer(ev.Request, resume); err == nil {
				asked = askedRequest{req: ev.Request, at: rec.Offset}
			}
		}
		return nil
	})
	return asked, err
}
