package agui

import (
	"bytes"
	"encoding/json"
	"strings"

	tether "github.com/tetherhq/tether"
)

// Messages returns the AG-UI messages of a thread's Tether messages, in
// order: what MESSAGES_SNAPSHOT carries. An assistant message becomes its
// reasoning messages (one per reasoning part, id "<id>:reasoning:<part>"),
// the assistant message (its text parts joined, its tool calls, or the
// toolCalls an AG-UI front end sent with it, metadata.ag_ui.toolCalls) and
// one tool message per call that has a result (id "<call>:result"), in the
// order a client that read the stream has them: the reasoning before the
// first text or tool part, the assistant message, the results, then the
// reasoning after; a tool message needs metadata.tool_call_id (else it is
// left out), and data parts have no AG-UI form.
//
// It is the one rendering of a conversation as AG-UI messages: the
// conversation an AG-UI agent is sent is AgentMessages, a view of it.
func Messages(msgs []tether.Message) []Event {
	out := make([]Event, 0, len(msgs))
	for _, m := range msgs {
		ms, _ := aguiMessages(m)
		out = append(out, ms...)
	}
	return out
}

// AgentMessages returns the conversation an AG-UI agent is sent
// (RunAgentInput.messages) for a thread's Tether messages: Messages as a
// conversation rather than a stream, so without reasoning messages (an
// agent reads what was said and done), every assistant message with a
// content ("" if none) and every tool call with arguments ("{}" if none:
// agents parse them), and assistant messages with neither content nor
// tool calls left out. A tool message says its result, not whether it was
// an error (which the calls an agent made know).
func AgentMessages(msgs []tether.Message) []Event {
	out := make([]Event, 0, len(msgs))
	for _, e := range Messages(msgs) {
		switch e["role"] {
		case "reasoning":
			continue
		case "tool":
			delete(e, "error")
		case "assistant":
			calls, hasCalls := e["toolCalls"]
			if _, ok := e["content"]; !ok {
				if !hasCalls {
					continue
				}
				e["content"] = ""
			}
			if cs, ok := calls.([]any); ok {
				for _, c := range cs {
					if f, ok := c.(map[string]any)["function"].(map[string]any); ok && f["arguments"] == "" {
						f["arguments"] = "{}"
					}
				}
			}
		}
		out = append(out, e)
	}
	return out
}

// aguiMessages is Messages for one message; ok is false if it has no
// AG-UI form.
func aguiMessages(m tether.Message) (out []Event, ok bool) {
	switch m.Role {
	case tether.RoleUser, tether.RoleSystem:
		return []Event{{"id": m.ID, "role": string(m.Role), "content": textOf(m.Parts)}}, true
	case tether.RoleTool:
		call := toolCallIDOf(m.Metadata)
		if call == "" {
			return nil, false
		}
		return []Event{{"id": m.ID, "role": "tool", "content": textOf(m.Parts), "toolCallId": call}}, true
	}
	var (
		asst    Event
		text    strings.Builder
		calls   []any
		results []Event
		after   []Event // reasoning that follows the assistant message
	)
	for i, p := range m.Parts {
		switch p.Type {
		case tether.PartReasoning:
			r := Event{"id": reasoningID(m.ID, i), "role": "reasoning", "content": p.Text}
			if asst == nil {
				out = append(out, r)
			} else {
				after = append(after, r)
			}
		case tether.PartText, tether.PartTool:
			if asst == nil {
				asst = Event{"id": m.ID, "role": "assistant"}
				out = append(out, asst)
			}
			if p.Type == tether.PartText {
				text.WriteString(p.Text)
				continue
			}
			calls = append(calls, map[string]any{"id": p.CallID, "type": "function",
				"function": map[string]any{"name": p.Name, "arguments": toolArgs(p)}})
			if content, ok := resultContent(p.Output, p.Error); ok {
				r := Event{"id": resultID(p.CallID), "role": "tool", "toolCallId": p.CallID, "content": content}
				if len(p.Output) == 0 {
					r["error"] = content
				}
				results = append(results, r)
			}
		}
	}
	frontCalls := frontEndToolCalls(m)
	if asst == nil && frontCalls != nil {
		asst = Event{"id": m.ID, "role": "assistant"}
		out = append(out, asst)
	}
	if asst != nil {
		if text.Len() > 0 {
			asst["content"] = text.String()
		}
		switch {
		case len(calls) > 0:
			asst["toolCalls"] = calls
		case frontCalls != nil:
			asst["toolCalls"] = frontCalls
		}
	}
	// Where HttpAgent's reducer puts them: a TOOL_CALL_RESULT right after
	// the assistant message that made the call (and the results already
	// there), reasoning where it starts.
	out = append(out, results...)
	return append(out, after...), true
}

// frontEndToolCalls is the toolCalls an AG-UI front end sent with an
// assistant message (POST /v1/ag-ui/{agent} keeps them in
// metadata.ag_ui.toolCalls: a Tether message has no parts for calls it did
// not make), or nil.
func frontEndToolCalls(m tether.Message) json.RawMessage {
	var md struct {
		AGUI struct {
			ToolCalls json.RawMessage `json:"toolCalls"`
		} `json:"ag_ui"`
	}
	if m.Role != tether.RoleAssistant || len(m.Metadata) == 0 || json.Unmarshal(m.Metadata, &md) != nil {
		return nil
	}
	if t := bytes.TrimLeft(md.AGUI.ToolCalls, " \t\r\n"); len(t) == 0 || t[0] != '[' {
		return nil
	}
	return md.AGUI.ToolCalls
}

// toolArgs is a tool call's arguments as AG-UI has them: the streamed
// input, else the input (a JSON string as the string, any other value as
// its JSON). A call whose streamed input was not JSON keeps it as a
// string input once it ends: its arguments stay the text streamed.
func toolArgs(p tether.Part) string {
	if p.InputText != "" {
		return p.InputText
	}
	return inputArgs(p.Input)
}

// inputArgs is a tool call's input as AG-UI arguments: a JSON string as
// the string, any other value as its JSON, none for null.
func inputArgs(input json.RawMessage) string {
	if len(input) == 0 || string(input) == "null" {
		return ""
	}
	return jsonText(input)
}

func textOf(parts []tether.Part) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Type == tether.PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// messageEvents returns the events of a message created whole
// (message.created by a worker), each construct opened and closed.
func messageEvents(m tether.Message) []Event {
	switch m.Role {
	case tether.RoleTool:
		if call := toolCallIDOf(m.Metadata); call != "" {
			return []Event{toolResultMessage(m.ID, call, textOf(m.Parts))}
		}
		return nil
	}
	var out []Event
	for i, p := range m.Parts {
		switch p.Type {
		case tether.PartReasoning:
			id := reasoningID(m.ID, i)
			out = append(out, ev(ReasoningStart, "messageId", id), ev(ReasoningMessageStart, "messageId", id, "role", "reasoning"))
			if p.Text != "" {
				out = append(out, ev(ReasoningMessageContent, "messageId", id, "delta", p.Text))
			}
			out = append(out, ev(ReasoningMessageEnd, "messageId", id), ev(ReasoningEnd, "messageId", id))
		case tether.PartText:
			out = append(out, ev(TextMessageStart, "messageId", m.ID, "role", textRole(m.Role)))
			if p.Text != "" {
				out = append(out, ev(TextMessageContent, "messageId", m.ID, "delta", p.Text))
			}
			out = append(out, ev(TextMessageEnd, "messageId", m.ID))
		case tether.PartTool:
			out = append(out, ev(ToolCallStart, "toolCallId", p.CallID, "toolCallName", p.Name, "parentMessageId", m.ID))
			if args := toolArgs(p); args != "" {
				out = append(out, ev(ToolCallArgs, "toolCallId", p.CallID, "delta", args))
			}
			out = append(out, ev(ToolCallEnd, "toolCallId", p.CallID))
			if content, ok := resultContent(p.Output, p.Error); ok {
				out = append(out, toolResult(p.CallID, content))
			}
		case tether.PartData:
			out = append(out, ev(Custom, "name", "tether.data",
				"value", map[string]any{"messageId": m.ID, "name": p.Name, "data": raw(p.Data)}))
		}
	}
	return out
}

// pendingParts returns the tool calls of m that ended done with neither
// output nor error (left for the front end), as projector state.
func pendingParts(m tether.Message) []*toolState {
	var out []*toolState
	for _, p := range m.Parts {
		if p.Type == tether.PartTool && p.Status == tether.ToolDone && len(p.Output) == 0 && (len(p.Error) == 0 || string(p.Error) == "null") {
			out = append(out, &toolState{id: p.CallID, name: p.Name, pending: true, hasArgs: true})
		}
	}
	return out
}

// aguiRunID is the AG-UI runId of a Tether run: the one its AG-UI request
// gave (metadata.ag_ui.runId), else the run's own id.
func aguiRunID(r *tether.Run) string {
	var md struct {
		AGUI struct {
			RunID string `json:"runId"`
		} `json:"ag_ui"`
	}
	if json.Unmarshal(r.Metadata, &md) == nil && md.AGUI.RunID != "" {
		return md.AGUI.RunID
	}
	return r.ID
}

// runInput is the RunAgentInput a RUN_STARTED echoes: the run's input
// messages, and the tools, context and forwarded props of its AG-UI
// request (metadata.ag_ui).
func runInput(thread string, r *runState) map[string]any {
	var md struct {
		AGUI struct {
			Tools          json.RawMessage `json:"tools"`
			Context        json.RawMessage `json:"context"`
			ForwardedProps json.RawMessage `json:"forwardedProps"`
		} `json:"ag_ui"`
	}
	_ = json.Unmarshal(r.meta, &md)
	msgs := r.input
	if msgs == nil {
		msgs = []Event{}
	}
	in := map[string]any{"threadId": thread, "runId": r.aguiID, "messages": msgs,
		"tools": arrayOr(md.AGUI.Tools), "context": arrayOr(md.AGUI.Context)}
	if len(md.AGUI.ForwardedProps) > 0 {
		in["forwardedProps"] = md.AGUI.ForwardedProps
	}
	return in
}

func arrayOr(v json.RawMessage) any {
	if len(v) > 0 && v[0] == '[' {
		return v
	}
	return []any{}
}

// interrupts is the AG-UI interrupts of a Tether request: for kind
// "ag-ui.interrupt" (an upstream AG-UI agent's) the ones it carries, as
// received; for any other kind one interrupt, id the request's, reason
// its kind, message the payload's prompt (or the payload, if a string)
// and the payload in metadata.payload.
func interrupts(req *tether.Request) []any {
	if req == nil {
		return []any{}
	}
	if req.Kind == KindInterrupt {
		var p struct {
			Interrupts []json.RawMessage `json:"interrupts"`
		}
		if json.Unmarshal(req.Payload, &p) == nil && len(p.Interrupts) > 0 {
			out := make([]any, 0, len(p.Interrupts))
			for _, in := range p.Interrupts {
				if len(in) > 0 && in[0] == '{' {
					out = append(out, in)
				}
			}
			if len(out) > 0 {
				return out
			}
		}
	}
	in := map[string]any{"id": req.ID, "reason": req.Kind}
	if len(req.Payload) > 0 {
		if msg := promptOf(req.Payload); msg != "" {
			in["message"] = msg
		}
		in["metadata"] = map[string]any{"payload": req.Payload}
	}
	return []any{in}
}

// promptOf is what a request asks in words: the payload if a string, else
// its "prompt" or "message" string.
func promptOf(payload json.RawMessage) string {
	var s string
	if json.Unmarshal(payload, &s) == nil {
		return s
	}
	var m struct {
		Prompt  string `json:"prompt"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(payload, &m)
	if m.Prompt != "" {
		return m.Prompt
	}
	return m.Message
}

// finishEvent is the AG-UI end of a run that ended with status st:
// RUN_FINISHED for done (outcome success, with the calls left for the
// front end) and cancelled (outcome cancelled), RUN_ERROR with the run's
// error code for error and aborted.
func finishEvent(thread, runID string, st tether.RunStatus, e *tether.ErrorInfo, pending []string) Event {
	switch st {
	case tether.RunDone:
		out := map[string]any{"type": "success"}
		if len(pending) > 0 {
			out["pendingToolCallIds"] = pending
		}
		return ev(RunFinished, "threadId", thread, "runId", runID, "outcome", out)
	case tether.RunCancelled:
		return ev(RunFinished, "threadId", thread, "runId", runID, "outcome", map[string]any{"type": "cancelled"})
	}
	code, msg := string(st), "The run ended with status "+string(st)+"."
	if e != nil && e.Code != "" {
		code = e.Code
	}
	if e != nil && e.Message != "" {
		msg = e.Message
	}
	return ev(RunError, "message", msg, "code", code)
}
