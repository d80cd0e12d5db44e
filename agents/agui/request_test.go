package agui

import (
	"encoding/json"
	"testing"

	tether "github.com/tetherhq/tether"
)

func TestMessagesOf(t *testing.T) {
	msgs := []tether.Message{
		{ID: "u1", Role: tether.RoleUser, Parts: []tether.Part{{Type: tether.PartText, Text: "hi"}}},
		{ID: "s1", Role: tether.RoleSystem, Parts: []tether.Part{{Type: tether.PartText, Text: "be brief"}}},
		{ID: "a1", Role: tether.RoleAssistant, Parts: []tether.Part{
			{Type: tether.PartReasoning, Text: "hmm"},
			{Type: tether.PartTool, CallID: "c1", Name: "f", Input: json.RawMessage(`{"x":1}`), Output: json.RawMessage(`{"ok":true}`), Status: "done"},
			{Type: tether.PartTool, CallID: "c2", Name: "g", InputText: `{"y":`, Status: "error", Error: json.RawMessage(`"boom"`)},
			{Type: tether.PartTool, CallID: "c3", Name: "h", Status: "done"},
			// Streamed arguments that were not JSON are kept as a string
			// input when the call ends: the upstream gets back its text.
			{Type: tether.PartTool, CallID: "c4", Name: "k", Input: json.RawMessage(`"{\"q\":"`), Output: json.RawMessage(`"late"`), Status: "done"},
			{Type: tether.PartText, Text: "done"},
		}},
		{ID: "r1", Role: tether.RoleAssistant, Parts: []tether.Part{{Type: tether.PartReasoning, Text: "only thinking"}}},
		{ID: "a2", Role: tether.RoleAssistant, Metadata: json.RawMessage(`{"ag_ui":{"toolCalls":[{"id":"fc","type":"function","function":{"name":"confirm","arguments":"{}"}}]}}`)},
		{ID: "t1", Role: tether.RoleTool, Metadata: json.RawMessage(`{"tool_call_id":"fc"}`), Parts: []tether.Part{{Type: tether.PartText, Text: "yes"}}},
		{ID: "t2", Role: tether.RoleTool, Parts: []tether.Part{{Type: tether.PartText, Text: "answers nothing"}}},
	}
	got, _ := json.Marshal(messagesOf(msgs))
	want := `[{"content":"hi","id":"u1","role":"user"},{"content":"be brief","id":"s1","role":"system"},` +
		`{"content":"done","id":"a1","role":"assistant","toolCalls":[` +
		`{"function":{"arguments":"{\"x\":1}","name":"f"},"id":"c1","type":"function"},` +
		`{"function":{"arguments":"{\"y\":","name":"g"},"id":"c2","type":"function"},` +
		`{"function":{"arguments":"{}","name":"h"},"id":"c3","type":"function"},` +
		`{"function":{"arguments":"{\"q\":","name":"k"},"id":"c4","type":"function"}]},` +
		`{"content":"{\"ok\":true}","id":"c1:result","role":"tool","toolCallId":"c1"},` +
		`{"content":"boom","id":"c2:result","role":"tool","toolCallId":"c2"},` +
		`{"content":"late","id":"c4:result","role":"tool","toolCallId":"c4"},` +
		`{"content":"","id":"a2","role":"assistant","toolCalls":[{"id":"fc","type":"function","function":{"name":"confirm","arguments":"{}"}}]},` +
		`{"content":"yes","id":"t1","role":"tool","toolCallId":"fc"}]`
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestResumeOf(t *testing.T) {
	req := &tether.Request{ID: "i", Kind: "ag-ui.interrupt", Payload: json.RawMessage(`{"interrupts":[{"id":"a"},{"id":"b"}]}`)}
	for value, want := range map[string]string{
		`{"resume":[{"interruptId":"a","status":"cancelled"}]}`: `[{"interruptId":"a","status":"cancelled"}]`,
		`[{"interruptId":"b","status":"resolved"}]`:             `[{"interruptId":"b","status":"resolved"}]`,
		`{"approved":true}`: `[{"interruptId":"a","payload":{"approved":true},"status":"resolved"},{"interruptId":"b","payload":{"approved":true},"status":"resolved"}]`,
		`null`:              `[{"interruptId":"a","status":"resolved"},{"interruptId":"b","status":"resolved"}]`,
	} {
		if got := string(resumeOf(json.RawMessage(value), req)); got != want {
			t.Errorf("%s: %s, want %s", value, got, want)
		}
	}
}
