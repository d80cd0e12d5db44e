package mapping

import tether "github.com/tetherhq/tether"

// Messages returns the messages the run made so far as AG-UI messages,
// for the request that resumes it upstream: each assistant message with
// its text as content and its tool calls, each tool result as a tool
// message after it. Reasoning is left out.
func (m *Mapper) Messages() []map[string]any {
	var out []map[string]any
	for _, msg := range m.order {
		if msg.role != tether.RoleAssistant {
			continue
		}
		var calls []ToolCall
		for _, c := range msg.calls {
			calls = append(calls, ToolCall{ID: c.upstream, Name: c.name, Arguments: c.args.String(), Result: c.result})
		}
		out = append(out, AssistantMessage(msg.id, msg.text.String(), calls)...)
	}
	return out
}

// ToolCall is a tool call of an assistant message, for AssistantMessage.
type ToolCall struct {
	ID, Name string
	// Arguments is the call's input as JSON text.
	Arguments string
	// Result is the call's result, nil if it has none.
	Result *string
}

// AssistantMessage returns an assistant message as AG-UI messages: the
// message with content and toolCalls (nothing if it has neither), then a
// tool message for each call with a result, named as the out projection
// names them (the call's id + ":result").
func AssistantMessage(id, text string, calls []ToolCall) []map[string]any {
	if text == "" && len(calls) == 0 {
		return nil
	}
	msg := map[string]any{"id": id, "role": "assistant", "content": text}
	var out []map[string]any
	if len(calls) > 0 {
		tcs := make([]map[string]any, len(calls))
		for i, c := range calls {
			args := c.Arguments
			if args == "" {
				args = "{}"
			}
			tcs[i] = map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": args}}
		}
		msg["toolCalls"] = tcs
	}
	out = append(out, msg)
	for _, c := range calls {
		if c.Result != nil {
			out = append(out, map[string]any{"id": c.ID + ":result", "role": "tool", "toolCallId": c.ID, "content": *c.Result})
		}
	}
	return out
}
