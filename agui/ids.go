package agui

import (
	"encoding/json"
	"strconv"

	tether "github.com/tetherhq/tether"
)

// reasoningID is the AG-UI id of the reasoning message made of part i of
// Tether message m. ":" is not allowed in Tether ids, so it names nothing
// else.
func reasoningID(m string, i int) string { return m + ":reasoning:" + strconv.Itoa(i) }

// resultID is the AG-UI id of the tool message holding call's result.
func resultID(call string) string { return call + ":result" }

// textRole is the role of a Tether message's TEXT_MESSAGE_START: user and
// system as they are, any other (a tool message sends no text message) as
// assistant.
func textRole(r tether.Role) string {
	switch r {
	case tether.RoleUser, tether.RoleSystem:
		return string(r)
	}
	return "assistant"
}

// toolCallIDOf reads metadata.tool_call_id, the call a tool message answers.
func toolCallIDOf(md json.RawMessage) string {
	var m struct {
		ToolCallID string `json:"tool_call_id"`
	}
	_ = json.Unmarshal(md, &m)
	return m.ToolCallID
}
