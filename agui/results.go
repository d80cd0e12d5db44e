package agui

import "encoding/json"

// toolResult is the TOOL_CALL_RESULT of a tool part's result, in the tool
// message resultID names.
func toolResult(call, content string) Event {
	return ev(ToolCallResult, "messageId", resultID(call), "toolCallId", call, "content", content, "role", "tool")
}

// toolResultMessage is the TOOL_CALL_RESULT of a Tether tool message id,
// which answers call.
func toolResultMessage(id, call, content string) Event {
	return ev(ToolCallResult, "messageId", id, "toolCallId", call, "content", content, "role", "tool")
}

// resultContent is the content of a tool call's result: its output (a JSON
// string as the string, any other value as its JSON), else its error (the
// same). ok is false if the call has neither.
func resultContent(output, errv json.RawMessage) (string, bool) {
	switch {
	case len(output) > 0:
		return jsonText(output), true
	case len(errv) > 0 && string(errv) != "null":
		return jsonText(errv), true
	}
	return "", false
}

// jsonText is a JSON string's value, or any other JSON value as its text.
func jsonText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}
