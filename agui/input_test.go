package agui

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
)

// httpAgentBody is what @ag-ui/client's HttpAgent 1.0.0 sends.
const httpAgentBody = `{"threadId":"t1","runId":"0b6e5a3e-8f1c-4a4e-9d55-2b0a1f3c9e11","protocolVersion":"1.0",
 "tools":[{"name":"confirm","description":"Ask the user","parameters":{"type":"object"}}],
 "context":[{"description":"page","value":"home"}],"forwardedProps":{"demo":{"tokens":5}},"state":{"n":1},
 "messages":[{"id":"u1","role":"user","content":"hi"},
  {"id":"m1","role":"assistant","content":"earlier","toolCalls":[{"id":"c1","type":"function","function":{"name":"confirm","arguments":"{}"}}]},
  {"id":"m1:reasoning:0","role":"reasoning","content":"hmm"},
  {"id":"c1:result","role":"tool","toolCallId":"c1","content":"ok"},
  {"id":"u2","role":"user","content":[{"type":"text","text":"and "},{"type":"image","source":{"type":"url","value":"x"}},{"type":"text","text":"now?"}]},
  {"id":"t2","role":"tool","toolCallId":"c9","content":"yes"},
  {"id":"d1","role":"developer","content":"be brief"},
  {"id":"a1","role":"activity","activityType":"x","content":{}}]}`

func TestParseRunAgentInput(t *testing.T) {
	in, err := ParseRunAgentInput([]byte(httpAgentBody))
	if err != nil {
		t.Fatal(err)
	}
	var md map[string]any
	if err := json.Unmarshal(in.RunMetadata(), &md); err != nil {
		t.Fatal(err)
	}
	agui := md["ag_ui"].(map[string]any)
	if agui["runId"] != in.RunID || agui["tools"] == nil || agui["context"] == nil || agui["state"] != nil || agui["forwardedProps"] == nil {
		t.Fatalf("ag_ui %v", agui)
	}
	if st := in.NewState(nil); string(st) != `{"n":1}` {
		t.Fatalf("new state %s", st)
	}
	if !reflect.DeepEqual(md["demo"], map[string]any{"tokens": float64(5)}) {
		t.Fatalf("demo %v", md["demo"])
	}
	// The thread holds u1 and m1 (with its call c1): what the projection
	// made of them is known too.
	snap := &tether.Snapshot{Messages: []tether.Message{
		{ID: "u1", Role: tether.RoleUser},
		{ID: "m1", Role: tether.RoleAssistant, Parts: []tether.Part{{Type: tether.PartTool, CallID: "c1"}}},
	}}
	msgs, err := in.NewMessages(Known(snap))
	if err != nil {
		t.Fatal(err)
	}
	want := []tether.InputMessage{
		{ID: "u2", Role: tether.RoleUser, Content: "and now?"},
		{ID: "t2", Role: tether.RoleTool, Content: "yes", Metadata: json.RawMessage(`{"tool_call_id":"c9"}`)},
		{ID: "d1", Role: tether.RoleSystem, Content: "be brief"},
	}
	if !reflect.DeepEqual(msgs, want) {
		t.Fatalf("new messages\n%+v\nwant\n%+v", msgs, want)
	}
}

func TestParseRunAgentInputErrors(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{`, "RunAgentInput"},
		{`{"threadId":"t1","runId":"r"} {}`, "unexpected data"},
		{`{"threadId":"a/b","runId":"r"}`, "threadId"},
		{`{"threadId":"t1"}`, "runId"},
		{`{"threadId":"t1","runId":"` + strings.Repeat("x", 256) + `"}`, "runId"},
		{`{"threadId":"t1","runId":"r","tools":{}}`, "tools must be an array"},
		{`{"threadId":"t1","runId":"r","messages":[{"role":"user"}]}`, "id is required"},
		{`{"threadId":"t1","runId":"r","messages":"x"}`, "RunAgentInput"},
		{`{"threadId":"t1","runId":"r","resume":[{"interruptId":"i","status":"maybe"}]}`, "status"},
		{`{"threadId":"t1","runId":"r","resume":[{"status":"resolved"}]}`, "interruptId"},
	} {
		_, err := ParseRunAgentInput([]byte(tc.body))
		var te *tether.Error
		if !errors.As(err, &te) || te.Code != tether.CodeBadRequest || !strings.Contains(te.Message, tc.want) {
			t.Errorf("%s: %v, want bad_request about %q", tc.body, err, tc.want)
		}
	}
	for _, body := range []string{
		`{"threadId":"t1","runId":"r","messages":[{"id":"x","role":"robot","content":"?"}]}`,
		`{"threadId":"t1","runId":"r","messages":[{"id":"x","role":"tool","content":"?"}]}`,
		`{"threadId":"t1","runId":"r","messages":[{"id":"a b","role":"user","content":"?"}]}`,
		`{"threadId":"t1","runId":"r","messages":[{"id":"x","role":"user","content":5}]}`,
	} {
		in, err := ParseRunAgentInput([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := in.NewMessages(func(InputMessage) bool { return false }); tether.CodeOf(err) != tether.CodeBadRequest {
			t.Errorf("%s: %v", body, err)
		}
	}
}

func TestResumeAnswer(t *testing.T) {
	ask := &tether.Request{ID: "q1", Kind: "input", Payload: json.RawMessage(`{"prompt":"?"}`)}
	a, err := ResumeAnswer(ask, []ResumeEntry{{InterruptID: "q1", Status: "resolved", Payload: json.RawMessage(`"speed"`)}})
	if err != nil || string(a.Value) != `"speed"` || a.Cancel {
		t.Fatalf("%+v %v", a, err)
	}
	if a, _ := ResumeAnswer(ask, []ResumeEntry{{InterruptID: "q1", Status: "resolved"}}); string(a.Value) != "null" {
		t.Fatalf("no payload: %s", a.Value)
	}
	if a, _ := ResumeAnswer(ask, []ResumeEntry{{InterruptID: "q1", Status: "cancelled"}}); !a.Cancel {
		t.Fatal("cancelled does not cancel")
	}
	for _, bad := range [][]ResumeEntry{nil, {{InterruptID: "q2", Status: "resolved"}}, {{InterruptID: "q1", Status: "resolved"}, {InterruptID: "q1", Status: "resolved"}}} {
		if _, err := ResumeAnswer(ask, bad); tether.CodeOf(err) != tether.CodeConflict {
			t.Errorf("%v: %v", bad, err)
		}
	}
	up := &tether.Request{ID: "x", Kind: KindInterrupt, Payload: json.RawMessage(`{"interrupts":[{"id":"i1","reason":"a"},{"id":"i2","reason":"b"}]}`)}
	entries := []ResumeEntry{{InterruptID: "i1", Status: "resolved", Payload: json.RawMessage(`{"ok":true}`)}, {InterruptID: "i2", Status: "cancelled"}}
	a, err = ResumeAnswer(up, entries)
	if err != nil || a.Cancel {
		t.Fatal(err)
	}
	if string(a.Value) != `{"resume":[{"interruptId":"i1","status":"resolved","payload":{"ok":true}},{"interruptId":"i2","status":"cancelled"}]}` {
		t.Fatalf("value %s", a.Value)
	}
	if _, err := ResumeAnswer(up, []ResumeEntry{{InterruptID: "i3", Status: "resolved"}}); tether.CodeOf(err) != tether.CodeConflict {
		t.Fatal(err)
	}
}
