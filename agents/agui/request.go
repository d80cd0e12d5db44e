package agui

import (
	"encoding/json"
	"strings"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/agents/agui/mapping"
)

// runOptions is what a run's metadata.ag_ui carries from an AG-UI front
// end (written by POST /v1/ag-ui/{agent}, docs/ag-ui.md): sent upstream
// as they came.
type runOptions struct {
	Tools          json.RawMessage `json:"tools"`
	Context        json.RawMessage `json:"context"`
	ForwardedProps json.RawMessage `json:"forwardedProps"`
	State          json.RawMessage `json:"state"`
}

func optionsOf(run tether.Run) runOptions {
	var md struct {
		AGUI runOptions `json:"ag_ui"`
	}
	_ = json.Unmarshal(run.Metadata, &md) // a run's metadata is an object; anything else in it is not ours
	return md.AGUI
}

func orDefault(v json.RawMessage, def string) json.RawMessage {
	if len(v) == 0 || string(v) == "null" {
		return json.RawMessage(def)
	}
	return v
}

// input builds the RunAgentInput of a request: the thread's conversation
// as of the claim, then (when resuming) what the run made since, the
// thread's state, and what the front end sent in metadata.ag_ui.
func input(s *agents.Session, m *mapping.Mapper, runID string, resume json.RawMessage) ([]byte, error) {
	o := optionsOf(s.Run)
	state := m.State()
	if state == nil {
		state = o.State
	}
	msgs := messagesOf(s.Messages)
	msgs = append(msgs, m.Messages()...)
	body := map[string]any{
		"threadId":        s.Run.ThreadID,
		"runId":           runID,
		"protocolVersion": "1.0",
		"state":           orDefault(state, "{}"),
		"messages":        msgs,
		"tools":           orDefault(o.Tools, "[]"),
		"context":         orDefault(o.Context, "[]"),
		"forwardedProps":  orDefault(o.ForwardedProps, "{}"),
	}
	if resume != nil {
		body["resume"] = resume
	}
	return json.Marshal(body)
}

// messagesOf turns a thread's messages into AG-UI messages (contract of
// docs/ag-ui.md): user and system text, assistant text with its tool calls
// followed by their results as tool messages, and tool messages (a
// frontend tool's result) with the call they answer.
func messagesOf(msgs []tether.Message) []map[string]any {
	out := make([]map[string]any, 0, len(msgs))
	for _, msg := range msgs {
		text := textOf(msg)
		switch msg.Role {
		case tether.RoleUser, tether.RoleSystem:
			out = append(out, map[string]any{"id": msg.ID, "role": string(msg.Role), "content": text})
		case tether.RoleTool:
			var md struct {
				ToolCallID string `json:"tool_call_id"`
			}
			_ = json.Unmarshal(msg.Metadata, &md)
			if md.ToolCallID == "" {
				continue // a tool message that answers nothing AG-UI can name
			}
			out = append(out, map[string]any{"id": msg.ID, "role": "tool", "toolCallId": md.ToolCallID, "content": text})
		case tether.RoleAssistant:
			var calls []mapping.ToolCall
			for _, p := range msg.Parts {
				if p.Type != tether.PartTool {
					continue
				}
				c := mapping.ToolCall{ID: p.CallID, Name: p.Name, Arguments: arguments(p)}
				if r, ok := result(p); ok {
					c.Result = &r
				}
				calls = append(calls, c)
			}
			am := mapping.AssistantMessage(msg.ID, text, calls)
			if len(calls) == 0 {
				// An assistant message that came in from an AG-UI front end
				// (POST /v1/ag-ui/{agent}) keeps its toolCalls in metadata.
				var md struct {
					AGUI struct {
						ToolCalls json.RawMessage `json:"toolCalls"`
					} `json:"ag_ui"`
				}
				if json.Unmarshal(msg.Metadata, &md) == nil && isArray(md.AGUI.ToolCalls) {
					am = []map[string]any{{"id": msg.ID, "role": "assistant", "content": text, "toolCalls": md.AGUI.ToolCalls}}
				}
			}
			out = append(out, am...)
		}
	}
	return out
}

func textOf(msg tether.Message) string {
	var b strings.Builder
	for _, p := range msg.Parts {
		if p.Type == tether.PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// arguments is a tool call's input as the JSON text AG-UI carries: its
// input (a JSON string as the string: streamed arguments that were not
// JSON are kept so once the call ends), else what was streamed of it.
func arguments(p tether.Part) string {
	if len(p.Input) > 0 && string(p.Input) != "null" {
		var s string
		if json.Unmarshal(p.Input, &s) == nil {
			return s
		}
		return string(p.Input)
	}
	return p.InputText
}

// result is a tool call's result as AG-UI's content: its output (a JSON
// string as the string, any other value as its JSON), else its error.
func result(p tether.Part) (string, bool) {
	for _, v := range []json.RawMessage{p.Output, p.Error} {
		if len(v) == 0 || string(v) == "null" {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s, true
		}
		return string(v), true
	}
	return "", false
}

// resumeOf turns the answer to an interrupt (run.input's value) into
// AG-UI's resume[]: the value's resume array as it is ({"resume": [...]},
// what POST /v1/ag-ui/{agent} writes), a bare array likewise, and any
// other value as the payload of a "resolved" entry for each interrupt.
func resumeOf(value json.RawMessage, req *tether.Request) json.RawMessage {
	var wrapped struct {
		Resume json.RawMessage `json:"resume"`
	}
	if json.Unmarshal(value, &wrapped) == nil && isArray(wrapped.Resume) {
		return wrapped.Resume
	}
	if isArray(value) {
		return value
	}
	var payload struct {
		Interrupts []struct {
			ID string `json:"id"`
		} `json:"interrupts"`
	}
	_ = json.Unmarshal(req.Payload, &payload)
	entries := make([]map[string]any, 0, len(payload.Interrupts))
	for _, in := range payload.Interrupts {
		e := map[string]any{"interruptId": in.ID, "status": "resolved"}
		if len(value) > 0 && string(value) != "null" {
			e["payload"] = value
		}
		entries = append(entries, e)
	}
	b, _ := json.Marshal(entries)
	return b
}

func isArray(v json.RawMessage) bool {
	t := strings.TrimLeft(string(v), " \t\r\n")
	return strings.HasPrefix(t, "[") && json.Valid(v)
}
