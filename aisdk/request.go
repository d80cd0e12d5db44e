package aisdk

import (
	"bytes"
	"encoding/json"
	"strings"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/runs"
)

// Triggers of a chat request.
const (
	TriggerSubmit     = "submit-message"
	TriggerRegenerate = "regenerate-message"
)

// ChatRequest is the body useChat's DefaultChatTransport sends:
// {id, messages, trigger, messageId?}, plus what the app adds with the
// transport's body option. Tether reads metadata from there: the run's
// metadata (e.g. {"demo": {...}}).
type ChatRequest struct {
	ID        string
	Messages  []InMessage
	Trigger   string
	MessageID string
	Metadata  json.RawMessage
}

// InMessage is what Tether reads of a UIMessage a client sends.
type InMessage struct {
	ID       string          `json:"id"`
	Role     string          `json:"role"`
	Metadata json.RawMessage `json:"metadata"`
	Parts    []InPart        `json:"parts"`
}

// InPart is what Tether reads of a part of a UIMessage a client sends.
type InPart struct {
	Type       string          `json:"type"`
	Text       string          `json:"text"`
	ToolCallID string          `json:"toolCallId"`
	State      string          `json:"state"`
	Output     json.RawMessage `json:"output"`
	Approval   *InApproval     `json:"approval"`
}

// InApproval is what Tether reads of a tool part's approval: its id, and
// the answer addToolApprovalResponse set.
type InApproval struct {
	ID       string  `json:"id"`
	Approved *bool   `json:"approved"`
	Reason   *string `json:"reason"`
}

// DecodeChatRequest decodes a chat request. The top level is read
// strictly (an unknown field is an error, as for every body of the API);
// messages leniently, since the AI SDK adds fields to them.
func DecodeChatRequest(body []byte) (*ChatRequest, error) {
	var top struct {
		ID        string            `json:"id"`
		Messages  []json.RawMessage `json:"messages"`
		Trigger   string            `json:"trigger"`
		MessageID string            `json:"messageId"`
		Metadata  json.RawMessage   `json:"metadata"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&top); err != nil {
		return nil, tether.Errorf(tether.CodeBadRequest, "request body: %s", tether.JSONError(err))
	}
	if dec.More() {
		return nil, tether.Errorf(tether.CodeBadRequest, "request body: unexpected data after the JSON object")
	}
	req := &ChatRequest{ID: top.ID, Trigger: top.Trigger, MessageID: top.MessageID, Metadata: top.Metadata}
	if m := bytes.TrimSpace(req.Metadata); len(m) > 0 && !bytes.Equal(m, []byte("null")) && m[0] != '{' {
		return nil, tether.Errorf(tether.CodeBadRequest, "metadata must be a JSON object")
	}
	if !tether.ValidID(req.ID) {
		return nil, tether.Errorf(tether.CodeBadRequest, "id (the chat id, a thread id) must be %s", tether.IDRule)
	}
	switch req.Trigger {
	case "":
		req.Trigger = TriggerSubmit
	case TriggerSubmit, TriggerRegenerate:
	default:
		return nil, tether.Errorf(tether.CodeBadRequest, "trigger must be %s or %s", TriggerSubmit, TriggerRegenerate)
	}
	if req.MessageID != "" && !tether.ValidID(req.MessageID) {
		return nil, tether.Errorf(tether.CodeBadRequest, "messageId (the answer to regenerate) must be %s", tether.IDRule)
	}
	for i, raw := range top.Messages {
		var m InMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, tether.Errorf(tether.CodeBadRequest, "messages[%d]: %s", i, tether.JSONError(err))
		}
		if !tether.ValidID(m.ID) {
			return nil, tether.Errorf(tether.CodeBadRequest, "messages[%d]: id must be %s", i, tether.IDRule)
		}
		switch m.Role {
		case "user", "assistant", "system":
		default:
			// A UIMessage has one of these; a message of another role
			// would be skipped, and a run made as if nothing was asked.
			return nil, tether.Errorf(tether.CodeBadRequest, "messages[%d]: role must be user, assistant or system", i)
		}
		req.Messages = append(req.Messages, m)
	}
	return req, nil
}

// Plan is what a chat request asks of the thread: a new run (Input, Key,
// Regenerates) or the answer to a waiting run's request (Answer).
type Plan struct {
	// Input is the run's input: the request's user and system messages
	// that the thread does not hold yet.
	Input []tether.InputMessage
	// Key is the run's idempotency key: a retried request finds the run
	// its first try created.
	Key string
	// Metadata is the run's metadata: the request's, with what
	// regenerates records.
	Metadata json.RawMessage
	// Answer, if set, answers the open request of a waiting run; no run
	// is created.
	Answer *Answer
}

// Answer is the answer to a waiting run's request, from the output a
// client set on the request's dynamic tool part.
type Answer struct {
	RunID     string
	RequestID string
	// CallID, for an approval sent again (RequestID empty), is the tool
	// call it answers: its request is the last of the run's that asked
	// the call's approval.
	CallID string
	Value  json.RawMessage
}

// PlanChat decides what a chat request does to a thread (snap, nil for a
// thread that does not exist yet):
//
//   - submit-message ending with new user messages: a run with them as
//     input, keyed by the last one's id;
//   - submit-message ending with the assistant message of a waiting run,
//     whose request's part has its output: that output answers the
//     request;
//   - regenerate-message: a run that replaces the answer to the chat's
//     last question (regenerateTarget), keyed by that answer's id, or,
//     when the question has no answer, by the last run's.
func PlanChat(req *ChatRequest, snap *tether.Snapshot) (*Plan, error) {
	if len(req.Messages) == 0 && req.Trigger == TriggerSubmit {
		return nil, tether.Errorf(tether.CodeBadRequest, "messages is empty")
	}
	known := map[string]bool{}
	if snap != nil {
		for _, m := range snap.Messages {
			known[m.ID] = true
		}
	}
	p := &Plan{Metadata: req.Metadata}
	for i, m := range req.Messages {
		if known[m.ID] || (m.Role != "user" && m.Role != "system") {
			continue
		}
		var text []string
		for _, part := range m.Parts {
			switch part.Type {
			case "text":
				text = append(text, part.Text)
			case "step-start":
			default:
				return nil, tether.Errorf(tether.CodeBadRequest, "messages[%d]: a part of type %q cannot be stored: Tether keeps the text parts of input messages", i, part.Type)
			}
		}
		in := tether.InputMessage{ID: m.ID, Role: tether.Role(m.Role), Content: strings.Join(text, "\n")}
		if !isEmptyObject(m.Metadata) {
			if b := bytes.TrimSpace(m.Metadata); b[0] != '{' {
				return nil, tether.Errorf(tether.CodeBadRequest, "messages[%d]: metadata must be a JSON object", i)
			}
			in.Metadata = m.Metadata
		}
		p.Input = append(p.Input, in)
	}

	if req.Trigger == TriggerRegenerate {
		target, key, err := regenerateTarget(req, snap)
		if err != nil {
			return nil, err
		}
		p.Key = "ai-sdk:regenerate:" + key
		if target != "" {
			p.Metadata = runs.MergePatch(objectOr(req.Metadata), mustJSON(map[string]any{RegenerateKey: map[string]string{"regenerates": target}}))
		}
		return p, nil
	}

	last := req.Messages[len(req.Messages)-1]
	if req.MessageID != "" && req.MessageID == last.ID && last.Role != "assistant" && edited(last, snap) {
		// useChat's edit of a message (sendMessage({text, messageId})):
		// the thread holds the message as it was, and would take the
		// request for a retry of the one that sent it.
		return nil, tether.Errorf(tether.CodeConflict, "message %s is in the chat already, with another text: a message cannot be edited (the chat's log is append-only); send a new one, or regenerate the answer", last.ID)
	}
	if last.Role == "assistant" {
		a, err := answerOf(last, snap)
		if err != nil {
			return nil, err
		}
		return &Plan{Answer: a}, nil
	}
	if !known[last.ID] {
		if err := WaitingError(snap, "send"); err != nil {
			return nil, err
		}
	}
	p.Key = "ai-sdk:" + last.ID
	return p, nil
}

// WaitingError is what the engine refuses as an active run (run_active)
// said as the user sees it, when the chat's active run waits for the
// answer to its request: a question left open, to answer (or the run to
// stop) before then ("send", "regenerate"). It is nil when the chat (snap,
// nil for none yet) has no run waiting so.
func WaitingError(snap *tether.Snapshot, then string) error {
	if snap == nil {
		return nil
	}
	for _, r := range snap.Runs {
		if r.ID != snap.Thread.ActiveRunID || r.Status != tether.RunWaiting || r.Request == nil {
			continue
		}
		if call := tether.ApprovalCall(r.Request); call != "" {
			return tether.Errorf(tether.CodeRunActive, "the chat's run %s waits for the approval of tool call %s (request %s): answer it (addToolApprovalResponse) or stop the run, then %s", r.ID, call, r.Request.ID, then)
		}
		return tether.Errorf(tether.CodeRunActive, "the chat's run %s waits for the answer to its request %s: answer it (its part's output, addToolOutput) or stop the run, then %s", r.ID, r.Request.ID, then)
	}
	return nil
}

// edited reports whether the thread holds a message of m's id with
// another text than m's.
func edited(m InMessage, snap *tether.Snapshot) bool {
	if snap == nil {
		return false
	}
	for _, held := range snap.Messages {
		if held.ID != m.ID {
			continue
		}
		var was, is []string
		for _, p := range held.Parts {
			if p.Type == tether.PartText {
				was = append(was, p.Text)
			}
		}
		for _, p := range m.Parts {
			if p.Type == "text" {
				is = append(is, p.Text)
			}
		}
		return strings.Join(was, "\n") != strings.Join(is, "\n")
	}
	return false
}

// answerOf finds, in the assistant message a client sent last, the
// output it set on the request of the waiting run whose answer the
// message is.
func answerOf(last InMessage, snap *tether.Snapshot) (*Answer, error) {
	if snap != nil {
		for _, r := range snap.Runs {
			// The client's message is the run's: named by its first
			// assistant message, or by the run if it asked before it had
			// one (the message that answered that request, sent again).
			if r.Status != tether.RunWaiting || r.Request == nil || uiMessageID(r, snap.Messages) != last.ID && r.ID != last.ID {
				continue
			}
			approval := approvalOf(r, snap.Messages)
			for _, part := range last.Parts {
				if v := approvalAnswer(part, approval); v != nil {
					return &Answer{RunID: r.ID, RequestID: r.Request.ID, Value: v}, nil
				}
				if part.ToolCallID == r.Request.ID && part.State == StateOutput {
					v := part.Output
					if len(v) == 0 {
						v = json.RawMessage("null")
					}
					return &Answer{RunID: r.ID, RequestID: r.Request.ID, Value: v}, nil
				}
			}
			if !holdsRequest(last, r, approval) {
				// The message before the open request reached the client:
				// its answer to an earlier request, sent again (its POST's
				// answer was lost).
				if a := answerGiven(last, r, snap.Messages); a != nil {
					return a, nil
				}
			}
			if approval != "" {
				return nil, tether.Errorf(tether.CodeBadRequest, "the last message is the answer of run %s, which waits for the approval %s of tool call %s: answer it (addToolApprovalResponse)", r.ID, approval, tether.ApprovalCall(r.Request))
			}
			return nil, tether.Errorf(tether.CodeBadRequest, "the last message is the answer of run %s, which waits on request %s: set that part's output (addToolOutput) to answer it", r.ID, r.Request.ID)
		}
		if a := repeatedAnswer(last, snap); a != nil {
			return a, nil
		}
	}
	return nil, tether.Errorf(tether.CodeConflict, "the last message, %s, is not the answer of a run that waits for input", last.ID)
}

// approvalOf returns the id of the approval a waiting run's request asks
// on a tool call's part (ApprovalID), "" if its request is no approval of
// a call of the run's. The call may have ended since it was asked (the
// stream then shows the request as a part of its own): a client that
// answered the approval before it saw that still answers the request.
func approvalOf(r tether.Run, msgs []tether.Message) string {
	call := tether.ApprovalCall(r.Request)
	if call == "" {
		return ""
	}
	id := ""
	for _, m := range answer(r, msgs) {
		for _, p := range m.Parts {
			if p.Type == tether.PartTool && p.CallID == call {
				id = ApprovalID(m.ID, call)
			}
		}
	}
	return id
}

// approvalAnswer is the answer a client's part gives to the approval id
// (addToolApprovalResponse: {"approved": bool, "message"?: reason}), nil
// if the part does not answer it.
func approvalAnswer(part InPart, id string) json.RawMessage {
	a := part.Approval
	if id == "" || a == nil || a.ID != id || a.Approved == nil || part.State != StateApprovalResponded {
		return nil
	}
	v := map[string]any{"approved": *a.Approved}
	if a.Reason != nil && *a.Reason != "" {
		v["message"] = *a.Reason
	}
	return mustJSON(v)
}

// repeatedAnswer finds, in a message sent again (its POST's answer was
// lost), the answer it gave (answerGiven) to a run that no longer waits,
// whose UI message it is (named by the run while it had no assistant
// message yet). Whether the run took that answer is the engine's to say
// (SubmitInput: the same answer to an answered request is that answer;
// anything else a conflict).
func repeatedAnswer(last InMessage, snap *tether.Snapshot) *Answer {
	for i := len(snap.Runs) - 1; i >= 0; i-- {
		r := snap.Runs[i]
		if r.Status == tether.RunWaiting || r.Status == tether.RunPending || uiMessageID(r, snap.Messages) != last.ID && r.ID != last.ID {
			continue
		}
		return answerGiven(last, r, snap.Messages)
	}
	return nil
}

// answerGiven returns the answer a client's message gave to a request of
// run r: the last output set on a request part, or approval answered on a
// call's part (the request that asked it is then found in the run's log:
// Answer.CallID); nil if it gives none.
func answerGiven(last InMessage, r tether.Run, msgs []tether.Message) *Answer {
	for j := len(last.Parts) - 1; j >= 0; j-- {
		part := last.Parts[j]
		if part.Type == "dynamic-tool" && part.State == StateOutput && tether.ValidID(part.ToolCallID) {
			v := part.Output
			if len(v) == 0 {
				v = json.RawMessage("null")
			}
			return &Answer{RunID: r.ID, RequestID: part.ToolCallID, Value: v}
		}
		if v := approvalAnswer(part, callApprovalID(r, msgs, part.ToolCallID)); v != nil {
			return &Answer{RunID: r.ID, CallID: part.ToolCallID, Value: v}
		}
	}
	return nil
}

// holdsRequest reports whether a client's message holds the part of the
// request waiting run r asks: its request part, or the part of the call
// whose approval it asks with that approval on it (approval, its id; ""
// when the run's messages do not show the call, and then any part of the
// call). A message that holds it was sent after the request reached the
// client, so it is not an earlier answer sent again. The call's part
// alone is not the request: the call may have shown (started, its
// arguments streamed) before its approval was asked, in the message that
// answered an earlier request.
func holdsRequest(last InMessage, r tether.Run, approval string) bool {
	call := tether.ApprovalCall(r.Request)
	for _, part := range last.Parts {
		switch {
		case part.ToolCallID == "":
		case part.ToolCallID == r.Request.ID:
			return true
		case part.ToolCallID == call && (approval == "" || part.Approval != nil && part.Approval.ID == approval):
			return true
		}
	}
	return false
}

// callApprovalID is the id of the approval of the run's tool call callID
// (ApprovalID), "" if the run has no such call.
func callApprovalID(r tether.Run, msgs []tether.Message, callID string) string {
	if callID == "" {
		return ""
	}
	for _, m := range answer(r, msgs) {
		for _, p := range m.Parts {
			if p.Type == tether.PartTool && p.CallID == callID {
				return ApprovalID(m.ID, callID)
			}
		}
	}
	return ""
}

// uiMessageID is the id of a run's UI message: its first assistant
// message's, else the run's.
func uiMessageID(r tether.Run, msgs []tether.Message) string {
	if a := answer(r, msgs); len(a) > 0 {
		return a[0].ID
	}
	return r.ID
}

func objectOr(b json.RawMessage) json.RawMessage {
	if isEmptyObject(b) {
		return json.RawMessage("{}")
	}
	return b
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
