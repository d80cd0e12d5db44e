package runner_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/agents/demo"
	"github.com/tetherhq/tether/engine"
)

// TestDemoApprove: with metadata.demo.approve the demo's tool call waits
// for an approval (kind "approval", the call's tool, arguments and id in
// the payload) with its input streamed and no output yet. Approved, the
// call gets its output; denied, it ends error {"code": "denied", message}
// and the answer says so. Any answer but a yes denies.
func TestDemoApprove(t *testing.T) {
	for _, tc := range []struct {
		answer  string
		allowed bool
		reason  string
	}{
		{`true`, true, ""},
		{`"Yes"`, true, ""},
		{`{"approved":true}`, true, ""},
		{`false`, false, "The tool call was denied."},
		{`"no"`, false, "The tool call was denied."},
		{`"Not with that query."`, false, "Not with that query."},
		{`{"approved":false,"message":"Later."}`, false, "Later."},
		{`{"approved":"yes"}`, false, "The tool call was denied."},
		{`"yes please"`, false, "yes please"},
	} {
		t.Run(tc.answer, func(t *testing.T) {
			e, _ := world(t, map[string]agents.Agent{"demo": demo.New()}, engine.Options{})
			run := start(t, e, "demo", `{"demo":{"tokens":10,"delay_ms":0,"approve":true}}`)
			snap := waitStatus(t, e, run.ID, tether.RunWaiting)
			rq := snap.Runs[0].Request
			var p struct {
				Prompt string            `json:"prompt"`
				Tool   string            `json:"tool"`
				CallID string            `json:"call_id"`
				Args   map[string]string `json:"args"`
			}
			if err := json.Unmarshal(rq.Payload, &p); err != nil {
				t.Fatalf("payload %s: %v", rq.Payload, err)
			}
			call := lastPart(t, snap, tether.PartTool)
			if rq.Kind != "approval" || p.Tool != "search" || p.Args["query"] != "why" || p.CallID != call.CallID ||
				!strings.HasPrefix(p.Prompt, "Allow search(") {
				t.Fatalf("request %s %s (call %s)", rq.Kind, rq.Payload, call.CallID)
			}
			if call.Status != tether.ToolRunning || call.Output != nil || call.InputText != `{"query":"why"}` {
				t.Fatalf("the call while it waits: %+v", call)
			}

			if _, err := e.SubmitInput(context.Background(), run.ID, rq.ID, []byte(tc.answer)); err != nil {
				t.Fatal(err)
			}
			snap = waitStatus(t, e, run.ID, tether.RunDone)
			call = lastPart(t, snap, tether.PartTool)
			fa, _ := e.FinalAnswer(context.Background(), "t1", run.ID)
			if tc.allowed {
				if call.Status != tether.ToolDone || call.Output == nil || call.Error != nil {
					t.Fatalf("an approved call: %+v", call)
				}
				if strings.Contains(fa.Content, "did not allow") {
					t.Fatalf("answer %q", fa.Content)
				}
				return
			}
			want, _ := json.Marshal(map[string]string{"code": "denied", "message": tc.reason})
			if call.Status != tether.ToolError || call.Output != nil || string(call.Error) != string(want) {
				t.Fatalf("a denied call: %+v", call)
			}
			if !strings.HasPrefix(fa.Content, "You did not allow the search") {
				t.Fatalf("answer %q", fa.Content)
			}
		})
	}
}

func lastPart(t *testing.T, snap *tether.Snapshot, typ string) tether.Part {
	t.Helper()
	for i := len(snap.Messages) - 1; i >= 0; i-- {
		ps := snap.Messages[i].Parts
		for j := len(ps) - 1; j >= 0; j-- {
			if ps[j].Type == typ {
				return ps[j]
			}
		}
	}
	t.Fatalf("no %s part in %+v", typ, snap.Messages)
	return tether.Part{}
}
