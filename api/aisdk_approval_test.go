package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/aisdk"
	"github.com/tetherhq/tether/api"
)

// askApproval starts a demo run whose tool call waits for its approval,
// and returns the stream's frames and its run.
func askApproval(t *testing.T, v *env, chat string) ([]uiFrame, string) {
	t.Helper()
	r := v.mustDo(200, "POST", chatAPI, chatBody(chat, []any{userMsg("u1", "search, if I allow it")}, `{"tokens":6,"delay_ms":0,"approve":true}`))
	return parseUI(t, string(r.body)), strings.TrimPrefix(r.header.Get("Content-Location"), "/v1/runs/")
}

// answerApproval answers the approval of the chat's waiting answer as
// useChat's addToolApprovalResponse does (the part approval-responded),
// and returns the answer's stream and the message the client held.
func answerApproval(t *testing.T, v *env, chat string, approved bool, reason string) ([]uiFrame, aisdk.UIMessage) {
	t.Helper()
	var msgs []aisdk.UIMessage
	v.mustDo(200, "GET", chatAPI+"/"+chat+"/messages", nil).json(&msgs)
	held := msgs[len(msgs)-1]
	p := &held.Parts[len(held.Parts)-1]
	if p.State != aisdk.StateApprovalRequested || p.Approval == nil {
		t.Fatalf("the answer's last part %+v, want its approval asked", p)
	}
	p.State = aisdk.StateApprovalResponded
	p.Approval = &aisdk.UIApproval{ID: p.Approval.ID, Approved: &approved, Reason: reason}
	body := map[string]any{"id": chat, "messages": []any{msgs[0], held}, "trigger": "submit-message", "messageId": held.ID}
	return parseUI(t, string(v.mustDo(200, "POST", chatAPI, body).body)), held
}

// TestAISDKApprovalAsked: a run that asks the approval of its tool call
// ends its stream with the AI SDK's approval request on the call's part
// (not a dynamic tool part of its own); the stream, /messages and a
// rebuild (GET …/stream) show the same message, and a resume from any of
// the stream's frames continues it exactly.
func TestAISDKApprovalAsked(t *testing.T) {
	v := newEnv(t, api.Options{})
	frames, run := askApproval(t, v, "ap1")
	n := len(frames)
	ask, end := frames[n-2].chunk, frames[n-1].chunk
	if ask["type"] != "tool-approval-request" || end["type"] != "finish" || end["finishReason"] != "tool-calls" {
		t.Fatalf("end of stream: %s %s", frames[n-2].raw, frames[n-1].raw)
	}
	call, _ := ask["toolCallId"].(string)
	if avail := frames[n-3].chunk; avail["type"] != "tool-input-available" || avail["toolCallId"] != call || avail["dynamic"] != nil {
		t.Errorf("before the approval: %s", frames[n-3].raw)
	}
	for _, f := range frames {
		if f.chunk["dynamic"] == true {
			t.Errorf("a dynamic tool part: %s", f.raw)
		}
	}
	var live aisdk.UIMessage
	applyUI(t, &live, frames)
	part := live.Parts[len(live.Parts)-1]
	if part.Type != "tool-search" || part.State != aisdk.StateApprovalRequested || part.Approval == nil || part.Approval.ID != ask["approvalId"] {
		t.Fatalf("the call's part: %+v", part)
	}

	var msgs []aisdk.UIMessage
	v.mustDo(200, "GET", chatAPI+"/ap1/messages", nil).json(&msgs)
	var rebuilt aisdk.UIMessage
	applyUI(t, &rebuilt, parseUI(t, string(v.mustDo(200, "GET", chatAPI+"/ap1/stream", nil).body)))
	a, _ := json.Marshal(live)
	b, _ := json.Marshal(msgs[len(msgs)-1])
	c, _ := json.Marshal(rebuilt)
	if string(a) != string(b) || string(a) != string(c) {
		t.Errorf("live     %s\nmessages %s\nrebuilt  %s", a, b, c)
	}

	for i, f := range frames[:n-1] {
		// After the last frame is the answer's stream: it waits for the
		// answer.
		if f.id == "" {
			continue
		}
		res := v.mustDo(200, "GET", fmt.Sprintf("%s/ap1/stream?run_id=%s&after=%s", chatAPI, run, f.id), nil)
		var got, want []string
		for _, g := range frames[:i+1] {
			got = append(got, g.raw)
		}
		for _, g := range parseUI(t, string(res.body)) {
			got = append(got, g.raw)
		}
		for _, g := range frames {
			want = append(want, g.raw)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("resumed after frame %d:\n%s\nwant\n%s", i, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}

	// A new message meanwhile: 409 run_active, which names the approval.
	r := v.do("POST", chatAPI, map[string]any{"id": "ap1", "messages": []any{msgs[0], msgs[1], userMsg("u2", "and?")}})
	if r.status != 409 || r.code() != "run_active" || !strings.Contains(string(r.body), "addToolApprovalResponse") {
		t.Errorf("a new message while the approval waits: %d %s", r.status, r.body)
	}
	// The message sent back unanswered: 400, and the run still waits.
	r = v.do("POST", chatAPI, map[string]any{"id": "ap1", "messages": []any{msgs[0], msgs[1]}, "trigger": "submit-message"})
	if r.status != 400 || !strings.Contains(string(r.body), "addToolApprovalResponse") {
		t.Errorf("unanswered: %d %s", r.status, r.body)
	}
	v.waitRun(run, tether.RunWaiting)
	v.mustDo(202, "POST", chatAPI+"/ap1/stop", nil)
	v.waitRun(run, tether.RunCancelled)
}

// TestAISDKApprovalApproved: the approval answered with
// addToolApprovalResponse({approved: true}) answers the run's request
// with {"approved": true}; the call runs, and the answer goes on.
func TestAISDKApprovalApproved(t *testing.T) {
	v := newEnv(t, api.Options{})
	_, run := askApproval(t, v, "ap2")
	more, held := answerApproval(t, v, "ap2", true, "")
	if more[0].chunk["type"] != "start" || more[0].chunk["messageId"] != held.ID || more[len(more)-1].chunk["finishReason"] != "stop" {
		t.Fatalf("answer's stream: %s … %s", more[0].raw, more[len(more)-1].raw)
	}
	if resp := more[1].chunk; resp["type"] != "tool-approval-response" || resp["approved"] != true || resp["approvalId"] != held.Parts[len(held.Parts)-1].Approval.ID {
		t.Errorf("after start: %s", more[1].raw)
	}
	applyUI(t, &held, more)
	var call *aisdk.UIPart
	for i := range held.Parts {
		if held.Parts[i].Type == "tool-search" {
			call = &held.Parts[i]
		}
	}
	if call == nil || call.State != aisdk.StateOutput || len(call.Output) == 0 || call.Approval == nil || call.Approval.Approved == nil || !*call.Approval.Approved {
		t.Fatalf("the call's part: %+v", call)
	}
	v.waitRun(run, tether.RunDone)
	var fa tether.FinalAnswer
	v.mustDo(200, "GET", "/v1/threads/ap2/final-answer", nil).json(&fa)
	if strings.Contains(fa.Content, "did not allow") || fa.Content == "" {
		t.Errorf("final answer %q", fa.Content)
	}
	// The answer a second time (a stale tab): the run does not wait.
	body := map[string]any{"id": "ap2", "messages": []any{userMsg("u1", "search, if I allow it"), held}, "trigger": "submit-message"}
	if r := v.do("POST", chatAPI, body); r.status != 409 {
		t.Errorf("the approval again: %d %s", r.status, r.body)
	}
}

// TestAISDKApprovalDenied: the approval answered with
// addToolApprovalResponse({approved: false, reason}) answers the run's
// request with {"approved": false, "message": reason}; the call ends
// denied (output-denied, the reason kept), as the AI SDK shows one, the
// same on the stream and in /messages.
func TestAISDKApprovalDenied(t *testing.T) {
	v := newEnv(t, api.Options{})
	_, run := askApproval(t, v, "ap3")
	more, held := answerApproval(t, v, "ap3", false, "Not now.")
	var types []string
	for _, f := range more {
		types = append(types, f.chunk["type"].(string))
	}
	if !strings.Contains(strings.Join(types, " "), "tool-approval-response tool-input-available tool-approval-response tool-output-denied") {
		t.Errorf("answer's stream: %v", types)
	}
	applyUI(t, &held, more)
	v.waitRun(run, tether.RunDone)
	var msgs []aisdk.UIMessage
	v.mustDo(200, "GET", chatAPI+"/ap3/messages", nil).json(&msgs)
	a, _ := json.Marshal(held)
	b, _ := json.Marshal(msgs[len(msgs)-1])
	if string(a) != string(b) {
		t.Errorf("live     %s\nmessages %s", a, b)
	}
	var call *aisdk.UIPart
	for i := range held.Parts {
		if held.Parts[i].Type == "tool-search" {
			call = &held.Parts[i]
		}
	}
	if call == nil || call.State != aisdk.StateOutputDenied || call.Approval == nil || call.Approval.Approved == nil || *call.Approval.Approved || call.Approval.Reason != "Not now." {
		t.Fatalf("the call's part: %+v", call)
	}
	var fa tether.FinalAnswer
	v.mustDo(200, "GET", "/v1/threads/ap3/final-answer", nil).json(&fa)
	if !strings.HasPrefix(fa.Content, "You did not allow the search") {
		t.Errorf("final answer %q", fa.Content)
	}
}
