package agents_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
)

// recorder is a Transport that keeps what is appended.
type recorder struct{ events []*tether.Event }

func (r *recorder) Append(_ context.Context, evs []*tether.Event) (bool, error) {
	r.events = append(r.events, evs...)
	return false, nil
}

func (r *recorder) WaitInput(context.Context, string) (json.RawMessage, error) {
	return json.RawMessage(`"ok"`), nil
}

// TestIDsUniqueAcrossAttempts: a reclaimed run's session must not reuse the
// message and request IDs of the attempt before it, which are in the log.
func TestIDsUniqueAcrossAttempts(t *testing.T) {
	ids := map[string]bool{}
	for attempt := 1; attempt <= 3; attempt++ {
		rec := &recorder{}
		s := agents.NewSession(tether.Run{ID: "run_x", Attempt: attempt}, nil, rec)
		m, err := s.StartMessage(context.Background(), tether.RoleAssistant)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Wait(context.Background(), "approval", nil); err != nil {
			t.Fatal(err)
		}
		req := rec.events[1].Request.ID
		for _, id := range []string{m, req} {
			if ids[id] || !tether.ValidID(id) || !strings.HasPrefix(id, "run_x-") {
				t.Fatalf("attempt %d: id %q reused or invalid", attempt, id)
			}
			ids[id] = true
		}
	}
}

func TestSessionFinish(t *testing.T) {
	rec := &recorder{}
	s := agents.NewSession(tether.Run{ID: "r", Attempt: 1}, []tether.Message{
		{Role: tether.RoleUser, Parts: []tether.Part{{Type: tether.PartText, Text: "first"}}},
		{Role: tether.RoleAssistant, Parts: []tether.Part{{Type: tether.PartText, Text: "reply"}}},
		{Role: tether.RoleUser, Parts: []tether.Part{{Type: tether.PartText, Text: "last "}, {Type: tether.PartText, Text: "question"}}},
	}, rec)
	if p := s.Prompt(); p != "last question" {
		t.Fatalf("prompt %q", p)
	}
	if err := s.Finish(context.Background(), tether.RunError, &tether.ErrorInfo{Code: "x", Message: "y"}); err != nil {
		t.Fatal(err)
	}
	if !s.Finished() || string(rec.events[0].Error) != `{"code":"x","message":"y"}` {
		t.Fatalf("finish: %+v", rec.events[0])
	}
	if err := s.Custom(context.Background(), "late", nil); err != agents.ErrFinished {
		t.Fatalf("emit after finish: %v", err)
	}
}

// cancelledServer is a Transport whose run was asked to cancel after the
// agent last looked: like the server, it refuses run.finished with any
// status but cancelled.
type cancelledServer struct{ recorder }

func (c *cancelledServer) Append(ctx context.Context, evs []*tether.Event) (bool, error) {
	for _, ev := range evs {
		if ev.Type == tether.EventRunFinished && ev.Status != string(tether.RunCancelled) {
			return false, tether.Errorf(tether.CodeConflict, "event 0 (run.finished): a cancel was requested: the run may only end cancelled")
		}
	}
	return c.recorder.Append(ctx, evs)
}

// An agent that returns just as a cancel is requested (its worker has not
// seen the request yet) gets its run ended cancelled at once, rather than
// left running until the server's cancel grace runs out.
func TestConcludeAfterALateCancel(t *testing.T) {
	for _, agentErr := range []error{nil, context.DeadlineExceeded} {
		srv := &cancelledServer{}
		s := agents.NewSession(tether.Run{ID: "r", Attempt: 1}, nil, srv)
		if err := s.Conclude(context.Background(), agentErr, false); err != nil {
			t.Fatalf("conclude (agent error %v): %v", agentErr, err)
		}
		if n := len(srv.events); n != 1 || srv.events[0].Status != string(tether.RunCancelled) || !s.Finished() {
			t.Fatalf("conclude (agent error %v): %d events, last %+v; want run.finished cancelled", agentErr, n, srv.events)
		}
	}
}

// refusing is a Transport that refuses the first append holding
// run.finished with err, as the server refuses an event too large or
// invalid.
type refusing struct {
	recorder
	err error
}

func (r *refusing) Append(ctx context.Context, evs []*tether.Event) (bool, error) {
	for _, ev := range evs {
		if ev.Type == tether.EventRunFinished && r.err != nil {
			err := r.err
			r.err = nil
			return false, err
		}
	}
	return r.recorder.Append(ctx, evs)
}

// A run.finished the server refused is not in the log: the session is
// not finished, and Conclude ends the run. One whose outcome is unknown
// may be in the log: the session counts as finished.
func TestRefusedFinish(t *testing.T) {
	ctx := context.Background()
	srv := &refusing{err: tether.Errorf(tether.CodeTooLarge, "event 0 (text.delta) is too large")}
	s := agents.NewSession(tether.Run{ID: "r", Attempt: 1}, nil, srv)
	err := s.Emit(ctx, &tether.Event{Type: tether.EventTextDelta, MessageID: "m", Delta: "huge"}, &tether.Event{Type: tether.EventRunFinished, Status: string(tether.RunDone)})
	if err == nil || s.Finished() {
		t.Fatalf("refused finish: err %v, finished %v", err, s.Finished())
	}
	if err := s.Conclude(ctx, err, false); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.events); n != 1 || srv.events[0].Status != string(tether.RunError) || !s.Finished() {
		t.Fatalf("conclude after a refused finish: %+v", srv.events)
	}

	unknown := &refusing{err: context.DeadlineExceeded}
	s = agents.NewSession(tether.Run{ID: "r", Attempt: 1}, nil, unknown)
	if err := s.Finish(ctx, tether.RunDone, nil); err == nil || !s.Finished() {
		t.Fatalf("finish of unknown outcome: err %v, finished %v", err, s.Finished())
	}
}
