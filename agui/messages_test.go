package agui

import (
	"encoding/json"
	"testing"

	tether "github.com/tetherhq/tether"
)

// An assistant message an AG-UI front end sent with tool calls (kept in
// metadata.ag_ui.toolCalls) is shown with them, as the agent is sent it:
// a join showed it without them, and the result that follows it answered
// a call no message made.
func TestMessagesFrontEndToolCalls(t *testing.T) {
	calls := `[{"id":"fc","type":"function","function":{"name":"confirm","arguments":"{}"}}]`
	msgs := []tether.Message{
		{ID: "u1", Role: tether.RoleUser, Parts: []tether.Part{{Type: tether.PartText, Text: "go"}}},
		{ID: "a1", Role: tether.RoleAssistant, Metadata: json.RawMessage(`{"ag_ui":{"toolCalls":` + calls + `}}`),
			Parts: []tether.Part{{Type: tether.PartText, Text: ""}}},
		{ID: "t1", Role: tether.RoleTool, Metadata: json.RawMessage(`{"tool_call_id":"fc"}`), Parts: []tether.Part{{Type: tether.PartText, Text: "yes"}}},
	}
	shown, _ := json.Marshal(Messages(msgs))
	want := `[{"content":"go","id":"u1","role":"user"},{"id":"a1","role":"assistant","toolCalls":` + calls + `},` +
		`{"content":"yes","id":"t1","role":"tool","toolCallId":"fc"}]`
	if string(shown) != want {
		t.Fatalf("shown\n%s\nwant\n%s", shown, want)
	}
	sent, _ := json.Marshal(AgentMessages(msgs))
	want = `[{"content":"go","id":"u1","role":"user"},{"content":"","id":"a1","role":"assistant","toolCalls":` + calls + `},` +
		`{"content":"yes","id":"t1","role":"tool","toolCallId":"fc"}]`
	if string(sent) != want {
		t.Fatalf("sent\n%s\nwant\n%s", sent, want)
	}
}
