package agui

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
)

// KindInterrupt is the kind of a Tether request that holds AG-UI
// interrupts, as an upstream AG-UI agent sent them: its payload is
// {"interrupts": [...]} and its answer {"resume": [...]}.
const KindInterrupt = "ag-ui.interrupt"

// MaxRunIDLen is the longest AG-UI runId accepted: it is the run's
// Idempotency-Key.
const MaxRunIDLen = 255

// RunAgentInput is the body of an AG-UI run request, as far as Tether
// reads it.
type RunAgentInput struct {
	ThreadID       string          `json:"threadId"`
	RunID          string          `json:"runId"`
	State          json.RawMessage `json:"state"`
	Messages       []InputMessage  `json:"messages"`
	Tools          json.RawMessage `json:"tools"`
	Context        json.RawMessage `json:"context"`
	ForwardedProps json.RawMessage `json:"forwardedProps"`
	Resume         []ResumeEntry   `json:"resume"`
}

// InputMessage is one AG-UI message of a request.
type InputMessage struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"toolCallId"`
	ToolCalls  json.RawMessage `json:"toolCalls"`
}

// ResumeEntry answers one interrupt.
type ResumeEntry struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
}

// ParseRunAgentInput decodes and checks a RunAgentInput. Fields Tether does
// not read are ignored (AG-UI adds fields; its own client strips unknown
// ones rather than failing), but the fields it reads must have their types.
// Errors are bad_request *tether.Error.
func ParseRunAgentInput(body []byte) (*RunAgentInput, error) {
	var in RunAgentInput
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&in); err != nil {
		return nil, tether.Errorf(tether.CodeBadRequest, "RunAgentInput: %s", tether.JSONError(err))
	}
	if dec.More() {
		return nil, tether.Errorf(tether.CodeBadRequest, "RunAgentInput: unexpected data after the JSON object")
	}
	switch {
	case !tether.ValidID(in.ThreadID):
		return nil, tether.Errorf(tether.CodeBadRequest, "threadId must be %s", tether.IDRule)
	case in.RunID == "" || len(in.RunID) > MaxRunIDLen:
		return nil, tether.Errorf(tether.CodeBadRequest, "runId must be 1 to %d bytes", MaxRunIDLen)
	}
	for name, v := range map[string]json.RawMessage{"tools": in.Tools, "context": in.Context} {
		if len(v) > 0 && string(v) != "null" && v[0] != '[' {
			return nil, tether.Errorf(tether.CodeBadRequest, "%s must be an array", name)
		}
	}
	for i, e := range in.Resume {
		if e.InterruptID == "" {
			return nil, tether.Errorf(tether.CodeBadRequest, "resume[%d]: interruptId is required", i)
		}
		if e.Status != "resolved" && e.Status != "cancelled" {
			return nil, tether.Errorf(tether.CodeBadRequest, "resume[%d]: status must be resolved or cancelled", i)
		}
	}
	for i, m := range in.Messages {
		if m.ID == "" {
			return nil, tether.Errorf(tether.CodeBadRequest, "messages[%d]: id is required", i)
		}
	}
	return &in, nil
}

// RunMetadata is the metadata of the run an AG-UI request creates:
// ag_ui holds what the agent may use of the request (runId, tools,
// context, forwardedProps; absent fields left out), and
// forwardedProps.demo, if any, is also demo (the demo agent's options).
// The request's state is not in it: it is the thread's (NewState).
func (in *RunAgentInput) RunMetadata() json.RawMessage {
	agui := map[string]json.RawMessage{}
	runID, _ := json.Marshal(in.RunID)
	agui["runId"] = runID
	for k, v := range map[string]json.RawMessage{"tools": in.Tools, "context": in.Context,
		"forwardedProps": in.ForwardedProps} {
		if len(v) > 0 && string(v) != "null" {
			agui[k] = v
		}
	}
	md := map[string]any{"ag_ui": agui}
	var fp struct {
		Demo json.RawMessage `json:"demo"`
	}
	if json.Unmarshal(in.ForwardedProps, &fp) == nil && len(fp.Demo) > 0 && string(fp.Demo) != "null" {
		md["demo"] = fp.Demo
	}
	b, _ := json.Marshal(md)
	return b
}

// NewState returns the state the request gives the thread, whose state
// is threadState (nil while null), or nil to leave it as it is. In AG-UI
// the client's state is the agent's input: a front end that shares its
// state with the agent (CopilotKit's useCoAgent) edits it between runs and
// sends it with the next. A state sent back unchanged (HttpAgent sends its
// whole state with every run, most often the one the agent gave it) is
// the thread's already, and is not written again. No state, null and the
// empty object leave the thread's as it is: {} is what HttpAgent sends
// when it knows no state (a new client on a thread it has not joined),
// not an edit.
func (in *RunAgentInput) NewState(threadState json.RawMessage) json.RawMessage {
	st := in.State
	if len(st) == 0 || string(st) == "null" || sameJSON(st, json.RawMessage("{}")) || sameJSON(st, threadState) {
		return nil
	}
	return st
}

// sameJSON reports whether a and b are the same JSON value, whatever the
// order of members and the spelling of numbers (compared as doubles, as a
// browser that sends the state back has them); an absent value is none.
func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// Known reports whether the thread of snap already holds an AG-UI message
// of a request: by its id, a Tether message's or one the projection made
// from one (a reasoning message "<message>:reasoning:<n>", a tool result
// "<call>:result"); and, for a tool message, by the call it answers, when
// the thread holds that call's result (its output or error, or a tool
// message). An AG-UI agent behind Tether that sends MESSAGES_SNAPSHOT
// names a result by its own id, and a front end sends it back so: it is
// the same result, not a new one.
func Known(snap *tether.Snapshot) func(m InputMessage) bool {
	ids, answered := map[string]bool{}, map[string]bool{}
	for _, m := range snap.Messages {
		ids[m.ID] = true
		if call := toolCallIDOf(m.Metadata); m.Role == tether.RoleTool && call != "" {
			answered[call] = true
		}
		for _, p := range m.Parts {
			if p.Type == tether.PartTool {
				ids[p.CallID] = true
				if _, ok := resultContent(p.Output, p.Error); ok {
					answered[p.CallID] = true
				}
			}
		}
	}
	return func(m InputMessage) bool {
		if ids[m.ID] || (m.Role == "tool" && answered[m.ToolCallID]) {
			return true
		}
		i := strings.IndexByte(m.ID, ':')
		return i > 0 && ids[m.ID[:i]]
	}
}

// NewMessages returns the request's messages that known does not know, as
// a run's input: user, system and developer (as system) messages with
// their text, assistant messages with their text (and their toolCalls in
// metadata.ag_ui.toolCalls), tool messages (a front-end tool's result) with
// metadata.tool_call_id. Reasoning and activity messages are not input.
func (in *RunAgentInput) NewMessages(known func(InputMessage) bool) ([]tether.InputMessage, error) {
	var out []tether.InputMessage
	for i, m := range in.Messages {
		if known(m) {
			continue
		}
		var role tether.Role
		var md json.RawMessage
		switch m.Role {
		case "user":
			role = tether.RoleUser
		case "system", "developer":
			role = tether.RoleSystem
		case "assistant":
			role = tether.RoleAssistant
			if len(m.ToolCalls) > 0 && string(m.ToolCalls) != "null" {
				md, _ = json.Marshal(map[string]any{"ag_ui": map[string]json.RawMessage{"toolCalls": m.ToolCalls}})
			}
		case "tool":
			if m.ToolCallID == "" {
				return nil, tether.Errorf(tether.CodeBadRequest, "messages[%d]: a tool message needs toolCallId", i)
			}
			role = tether.RoleTool
			md, _ = json.Marshal(map[string]string{"tool_call_id": m.ToolCallID})
		case "reasoning", "activity":
			continue
		default:
			return nil, tether.Errorf(tether.CodeBadRequest, "messages[%d]: unknown role", i)
		}
		if !tether.ValidID(m.ID) {
			return nil, tether.Errorf(tether.CodeBadRequest, "messages[%d]: id must be %s", i, tether.IDRule)
		}
		text, err := contentText(m.Content)
		if err != nil {
			return nil, tether.Errorf(tether.CodeBadRequest, "messages[%d]: %s", i, err.Error())
		}
		out = append(out, tether.InputMessage{ID: m.ID, Role: role, Content: text, Metadata: md})
	}
	return out, nil
}

type contentError string

func (e contentError) Error() string { return string(e) }

// contentText is a message's content as text: a string, or the text parts
// of a list of content parts joined (media parts have no Tether form).
func contentText(c json.RawMessage) (string, error) {
	if len(c) == 0 || string(c) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(c, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(c, &parts) != nil {
		return "", contentError("content must be a string or a list of content parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

// Answer is what a request's resume[] does to the run waiting on req.
type Answer struct {
	// Value is the run.input value, unless Cancel.
	Value json.RawMessage
	// Cancel asks to cancel the run instead (a cancelled answer to a
	// request that is not an AG-UI interrupt: Tether agents have no way to
	// go on without their answer).
	Cancel bool
}

// ResumeAnswer maps resume[] onto the answer to req, the request of the
// waiting run: for an ag-ui.interrupt request, {"resume": [the entries]}
// (every one must name one of its interrupts); for any other kind, the
// single entry for the request's id: resolved gives its payload (null if
// none), cancelled cancels the run. It returns a conflict *tether.Error if
// resume does not answer req.
func ResumeAnswer(req *tether.Request, resume []ResumeEntry) (*Answer, error) {
	if req.Kind == KindInterrupt {
		ids := map[string]bool{}
		for _, in := range interrupts(req) {
			var x struct {
				ID string `json:"id"`
			}
			switch v := in.(type) {
			case json.RawMessage:
				_ = json.Unmarshal(v, &x)
			case map[string]any:
				x.ID, _ = v["id"].(string)
			}
			ids[x.ID] = true
		}
		for _, e := range resume {
			if !ids[e.InterruptID] {
				return nil, tether.Errorf(tether.CodeConflict, "interrupt %q is not pending", clip.String(e.InterruptID, 64))
			}
		}
		v, _ := json.Marshal(map[string]any{"resume": resume})
		return &Answer{Value: v}, nil
	}
	if len(resume) != 1 || resume[0].InterruptID != req.ID {
		return nil, tether.Errorf(tether.CodeConflict, "resume must answer the one pending interrupt %q", clip.String(req.ID, 64))
	}
	if resume[0].Status == "cancelled" {
		return &Answer{Cancel: true}, nil
	}
	v := resume[0].Payload
	if len(v) == 0 {
		v = json.RawMessage("null")
	}
	return &Answer{Value: v}, nil
}
