package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	tether "github.com/tetherhq/tether"
)

// Session is one run given to an agent, and the means to answer it.
type Session struct {
	// Run is the run, as of when it was claimed.
	Run tether.Run
	// Messages is the thread's conversation as of the claim, the run's
	// input included.
	Messages []tether.Message
	// State is the thread's state as of the claim (protocol §2, "Thread
	// state"), nil while null. SetState and PatchState change the
	// thread's, not this copy.
	State json.RawMessage

	t        Transport
	seq      int
	finished bool
	cancel   bool
}

// NewSession returns a session for a claimed run.
func NewSession(run tether.Run, messages []tether.Message, t Transport) *Session {
	return &Session{Run: run, Messages: messages, t: t}
}

// ErrFinished is returned by a Session once the run has finished.
var ErrFinished = errors.New("agents: the run is finished")

// ErrNotSent is wrapped by a Transport's append error when the events
// were never sent, so none of them is in the log: a run.finished among
// them leaves the run open, for Conclude to end.
var ErrNotSent = errors.New("agents: the events were not sent")

// Emit appends events to the run, atomically.
func (s *Session) Emit(ctx context.Context, evs ...*tether.Event) error {
	if s.finished {
		return ErrFinished
	}
	finishes := false
	for _, ev := range evs {
		if ev.Type == tether.EventRunFinished {
			finishes = true
		}
	}
	// The run counts as finished from the moment its run.finished may be
	// in the log: an append whose outcome is unknown (its context ended,
	// the server could not answer) may have landed.
	s.finished = finishes
	cancel, err := s.t.Append(ctx, evs)
	if cancel {
		s.cancel = true
	}
	if err != nil {
		if Refused(err) || errors.Is(err, ErrNotSent) {
			// Certainly not in the log (an event too large or invalid, a
			// status the run may not end with, a batch never sent): the
			// run is still open, and Conclude can still end it.
			s.finished = false
		}
		return fmt.Errorf("emit: %w", err)
	}
	return nil
}

// Refused reports whether an append's error means the server refused its
// events (bad_request, too_large, conflict), so that none of them is in
// the log: a run.finished among them left the run open.
func Refused(err error) bool {
	switch tether.CodeOf(err) {
	case tether.CodeBadRequest, tether.CodeTooLarge, tether.CodeConflict:
		return true
	}
	return false
}

// CancelRequested reports whether a client asked to cancel the run (as of
// the last append).
func (s *Session) CancelRequested() bool { return s.cancel }

// Finished reports whether the session has sent run.finished: the server
// took it, or its outcome is unknown. One the server refused (an event of
// its append too large or invalid) does not count: the run is still open.
func (s *Session) Finished() bool { return s.finished }

// NewMessageID returns a new message ID unique within the run, also across
// attempts: a reclaimed run's earlier messages are still in the thread.
func (s *Session) NewMessageID() string {
	s.seq++
	return s.idPrefix() + fmt.Sprintf("m%d", s.seq)
}

// idPrefix makes the IDs a session creates unique to its attempt.
func (s *Session) idPrefix() string {
	if s.Run.Attempt > 1 {
		return fmt.Sprintf("%s-a%d-", s.Run.ID, s.Run.Attempt)
	}
	return s.Run.ID + "-"
}

// StartMessage starts a message and returns its ID.
func (s *Session) StartMessage(ctx context.Context, role tether.Role) (string, error) {
	id := s.NewMessageID()
	return id, s.Emit(ctx, &tether.Event{Type: tether.EventMessageStarted, MessageID: id, Role: role})
}

// Text appends text to a message.
func (s *Session) Text(ctx context.Context, messageID, delta string) error {
	return s.Emit(ctx, &tether.Event{Type: tether.EventTextDelta, MessageID: messageID, Delta: delta})
}

// Reasoning appends reasoning to a message.
func (s *Session) Reasoning(ctx context.Context, messageID, delta string) error {
	return s.Emit(ctx, &tether.Event{Type: tether.EventReasoningDelta, MessageID: messageID, Delta: delta})
}

// ToolStarted starts a tool call in a message.
func (s *Session) ToolStarted(ctx context.Context, messageID, callID, name string) error {
	return s.Emit(ctx, &tether.Event{Type: tether.EventToolStarted, MessageID: messageID, CallID: callID, Name: name})
}

// ToolDelta streams part of a tool call's input.
func (s *Session) ToolDelta(ctx context.Context, messageID, callID, delta string) error {
	return s.Emit(ctx, &tether.Event{Type: tether.EventToolDelta, MessageID: messageID, CallID: callID, Delta: delta})
}

// ToolFinished finishes a tool call. Input, output and toolErr are encoded
// as JSON; nil leaves them out (input then comes from the streamed deltas).
func (s *Session) ToolFinished(ctx context.Context, messageID, callID string, input, output, toolErr any) error {
	ev := &tether.Event{Type: tether.EventToolFinished, MessageID: messageID, CallID: callID}
	var err error
	if ev.Input, err = rawJSON(input); err != nil {
		return err
	}
	if ev.Output, err = rawJSON(output); err != nil {
		return err
	}
	if ev.Error, err = rawJSON(toolErr); err != nil {
		return err
	}
	return s.Emit(ctx, ev)
}

// UpdateMessage merges metadata into a message's metadata (JSON merge
// patch).
func (s *Session) UpdateMessage(ctx context.Context, messageID string, metadata any) error {
	m, err := rawJSON(metadata)
	if err != nil {
		return err
	}
	return s.Emit(ctx, &tether.Event{Type: tether.EventMessageUpdated, MessageID: messageID, Metadata: m})
}

// FinishMessage ends a message with a status (done, error or aborted).
func (s *Session) FinishMessage(ctx context.Context, messageID string, status tether.MessageStatus) error {
	return s.Emit(ctx, &tether.Event{Type: tether.EventMessageFinished, MessageID: messageID, Status: string(status)})
}

// Custom sends an application event to clients.
func (s *Session) Custom(ctx context.Context, name string, data any) error {
	d, err := rawJSON(data)
	if err != nil {
		return err
	}
	return s.Emit(ctx, &tether.Event{Type: tether.EventCustom, Name: name, Data: d})
}

// SetState replaces the thread's state (state.snapshot) with v, encoded as
// JSON; nil sets it to null.
func (s *Session) SetState(ctx context.Context, v any) error {
	st, err := rawJSON(v)
	if err != nil {
		return err
	}
	if st == nil {
		st = json.RawMessage("null")
	}
	return s.Emit(ctx, &tether.Event{Type: tether.EventStateSnapshot, State: st})
}

// PatchState applies an RFC 6902 JSON Patch (an array of operations,
// encoded as JSON) to the thread's state (state.delta). A patch that does
// not apply is refused (conflict) and changes nothing.
func (s *Session) PatchState(ctx context.Context, patch any) error {
	p, err := rawJSON(patch)
	if err != nil {
		return err
	}
	return s.Emit(ctx, &tether.Event{Type: tether.EventStateDelta, Patch: p})
}

// Wait asks for input (run.waiting) and returns the answer once a client
// posts it (run.input). The run waits meanwhile.
func (s *Session) Wait(ctx context.Context, kind string, payload any) (json.RawMessage, error) {
	p, err := rawJSON(payload)
	if err != nil {
		return nil, err
	}
	s.seq++
	req := &tether.Request{ID: s.idPrefix() + fmt.Sprintf("r%d", s.seq), Kind: kind, Payload: p}
	if err := s.Emit(ctx, &tether.Event{Type: tether.EventRunWaiting, Request: req}); err != nil {
		return nil, err
	}
	return s.t.WaitInput(ctx, req.ID)
}

// Ask asks for input with a request the agent names itself (run.waiting
// with req) and returns the answer once a client posts it. req.ID must be
// a valid id not used before in the run (an id of a request the run had
// answered is refused, conflict: a client's repeat of that answer would
// answer this one); Wait makes one.
func (s *Session) Ask(ctx context.Context, req tether.Request) (json.RawMessage, error) {
	r := req
	if err := s.Emit(ctx, &tether.Event{Type: tether.EventRunWaiting, Request: &r}); err != nil {
		return nil, err
	}
	return s.t.WaitInput(ctx, req.ID)
}

// Finish ends the run with a status (done, error or cancelled) and, for
// error, what went wrong (shown to clients as is).
func (s *Session) Finish(ctx context.Context, status tether.RunStatus, info *tether.ErrorInfo) error {
	ev := &tether.Event{Type: tether.EventRunFinished, Status: string(status)}
	if info != nil {
		b, err := json.Marshal(info)
		if err != nil {
			return err
		}
		ev.Error = b
	}
	return s.Emit(ctx, ev)
}

// Prompt returns the text of the last user message of the conversation.
func (s *Session) Prompt() string {
	for i := len(s.Messages) - 1; i >= 0; i-- {
		m := s.Messages[i]
		if m.Role != tether.RoleUser {
			continue
		}
		var b strings.Builder
		for _, p := range m.Parts {
			if p.Type == tether.PartText {
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	return ""
}

func rawJSON(v any) (json.RawMessage, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return b, nil
}
