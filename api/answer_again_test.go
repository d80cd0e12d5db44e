package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agui/aguitest"
	"github.com/tetherhq/tether/aisdk"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// The answer to a run's first request sent again (its POST's answer was
// lost) while the run already waits on its second: the same answer is a
// safe repeat on every route that answers (nothing appended), another
// answer to the first request is still a conflict, and the second request
// is answered as ever.

// goDo sends a request in the background (one that answers once a worker
// has appended more); its response comes on the channel.
func (v *env) goDo(method, path string, body any) <-chan *resp {
	j, _ := json.Marshal(body)
	out := make(chan *resp, 1)
	go func() {
		req, _ := http.NewRequest(method, v.url+path, bytes.NewReader(j))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- &resp{status: -1, body: []byte(err.Error())}
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		out <- &resp{res.StatusCode, res.Header, b}
	}()
	return out
}

// aguiFrames reads an AG-UI stream's body, checked as a stream of its own.
func aguiFrames(t *testing.T, body []byte) []aguiFrame {
	t.Helper()
	a := &aguiReader{t: t, rd: bufio.NewReader(bytes.NewReader(body)), v: aguitest.NewVerifier()}
	frames, err := a.all()
	if err != io.EOF {
		t.Fatalf("the stream ends with %v", err)
	}
	return frames
}

// TestInputRepeatedWhileNextAsked: POST …/input.
func TestInputRepeatedWhileNextAsked(t *testing.T) {
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	run, lease := v.waitingRun("t1")
	answer := `{"request_id":"q1","value":{"pick":"b"}}`
	v.mustDo(202, "POST", "/v1/runs/"+run+"/input", answer)
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"run.waiting","request":{"id":"q2","kind":"input"}}]`, lease...)

	var got tether.Run
	v.mustDo(202, "POST", "/v1/runs/"+run+"/input", `{"request_id":"q1","value":{ "pick": "b" }}`).json(&got)
	if got.Status != tether.RunWaiting || got.Request == nil || got.Request.ID != "q2" {
		t.Fatalf("the repeat answered %+v, want the run waiting on q2", got)
	}
	if in := v.inputsOf("t1"); len(in) != 1 {
		t.Fatalf("%d run.input events, want 1", len(in))
	}
	if r := v.do("POST", "/v1/runs/"+run+"/input", `{"request_id":"q1","value":{"pick":"c"}}`); r.status != 409 || r.code() != "conflict" {
		t.Fatalf("another answer to q1: %d %s, want 409 conflict", r.status, r.body)
	}
	v.mustDo(202, "POST", "/v1/runs/"+run+"/input", `{"request_id":"q2","value":"ok"}`)
	if in := v.inputsOf("t1"); len(in) != 2 {
		t.Fatalf("%d run.input events, want 2", len(in))
	}
}

// TestAGUIResumeRepeatedWhileNextAsked: a resume[] sent again. It got 409
// ("resume must answer the one pending interrupt"): only the request the
// run waits on was looked at, and the one before only once none was open.
func TestAGUIResumeRepeatedWhileNextAsked(t *testing.T) {
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	run, lease := v.waitingRun("t1")
	resume := runInput("t1", "ag-2", "", `{}`)
	resume["messages"] = []any{}
	resume["resume"] = []any{map[string]any{"interruptId": "q1", "status": "resolved", "payload": "latency"}}
	answered := v.goDo("POST", "/v1/ag-ui/ext", resume)
	waitInputs(t, v, "t1", 1)
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"text.delta","message_id":"a1","delta":"And "},{"type":"run.waiting","request":{"id":"q2","kind":"input"}}]`, lease...)
	r := <-answered
	if r.status != 200 {
		t.Fatalf("the answer: %d %s", r.status, r.body)
	}
	first := aguiFrames(t, r.body)
	logLen := len(v.readLog("t1"))

	r = v.do("POST", "/v1/ag-ui/ext", resume)
	if r.status != 200 {
		t.Fatalf("the answer to q1 sent again while q2 is open: %d %s", r.status, r.body)
	}
	again := aguiFrames(t, r.body)
	if len(again) != len(first) {
		t.Fatalf("the answer sent again: %d frames, the first time %d", len(again), len(first))
	}
	for i := range first {
		if offsetOf(again[i]) != offsetOf(first[i]) || typeOf(again[i]) != typeOf(first[i]) {
			t.Fatalf("the answer sent again, frame %d: %s, the first time %s", i, again[i].raw, first[i].raw)
		}
	}
	if n := len(v.readLog("t1")); n != logLen {
		t.Fatalf("the answer sent again appended %d events", n-logLen)
	}
	resume["resume"] = []any{map[string]any{"interruptId": "q1", "status": "resolved", "payload": "throughput"}}
	if r := v.do("POST", "/v1/ag-ui/ext", resume); r.status != 409 || r.code() != "conflict" {
		t.Fatalf("another answer to q1: %d %s", r.status, r.body)
	}
	// A cancel of q1 now is another answer too: it must not stop the run.
	resume["resume"] = []any{map[string]any{"interruptId": "q1", "status": "cancelled"}}
	if r := v.do("POST", "/v1/ag-ui/ext", resume); r.status != 409 || r.code() != "conflict" {
		t.Fatalf("a cancel of the answered q1: %d %s", r.status, r.body)
	}
	var snap struct{ Run tether.Run }
	v.mustDo(200, "GET", "/v1/runs/"+run, nil).json(&snap)
	if snap.Run.Status != tether.RunWaiting || !snap.Run.CancelRequestedAt.IsZero() {
		t.Fatalf("the run after the refused answers: %+v", snap.Run)
	}
	// q2 is answered as ever.
	resume["resume"] = []any{map[string]any{"interruptId": "q2", "status": "resolved", "payload": "ok"}}
	answered = v.goDo("POST", "/v1/ag-ui/ext", resume)
	waitInputs(t, v, "t1", 2)
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"run.finished","status":"done"}]`, lease...)
	if r := <-answered; r.status != 200 {
		t.Fatalf("the answer to q2: %d %s", r.status, r.body)
	}
}

// waitInputs waits until thread tid's log holds n run.input events.
func waitInputs(t *testing.T, v *env, tid string, n int) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, "the answer in the log", func() bool { return len(v.inputsOf(tid)) >= n })
}

// askCallApproval appends, as run's worker, tool call call of message a1
// and the request asking its approval.
func askCallApproval(v *env, run string, lease []string, call string) {
	v.t.Helper()
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[`+
		`{"type":"tool.started","message_id":"a1","call_id":"`+call+`","name":"search"},`+
		`{"type":"run.waiting","request":{"id":"ap-`+call+`","kind":"approval","payload":{"tool":"search","call_id":"`+call+`"}}}]`, lease...)
}

// extChat sends the first message of chat to agent "ext", claims its
// run as a worker, starts its answer a1 and asks (ask) what the run waits
// on; it returns the run and the lease header once the chat's stream
// ended with the question.
func (v *env) extChat(chat string, ask func(run string, lease []string)) (string, []string) {
	v.t.Helper()
	asked := v.goDo("POST", chatPath, chatBody(chat, []any{userMsg("u1", "ask twice")}, `{}`))
	var claim struct {
		Run   tether.Run
		Lease struct{ Token string }
	}
	v.mustDo(200, "POST", "/v1/workers/claim", `{"worker_id":"w1","agents":["ext"],"wait_ms":5000}`).json(&claim)
	run, lease := claim.Run.ID, []string{"Tether-Lease", claim.Lease.Token}
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"message.started","message_id":"a1","role":"assistant"}]`, lease...)
	ask(run, lease)
	if r := <-asked; r.status != 200 {
		v.t.Fatalf("the question: %d %s", r.status, r.body)
	}
	return run, lease
}

// chatPath is the AI SDK chat of agent "ext", whose runs a test's worker
// makes.
const chatPath = "/v1/ai-sdk/ext/chat"

// TestAISDKApprovalRepeatedWhileNextAsked: useChat's answer to approval 1
// (addToolApprovalResponse) sent again, while the run asks approval 2. It
// got 400 (the message was taken for one that leaves approval 2
// unanswered).
func TestAISDKApprovalRepeatedWhileNextAsked(t *testing.T) {
	const chat = "ap2"
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	run, lease := v.extChat(chat, func(run string, lease []string) { askCallApproval(v, run, lease, "c1") })

	var msgs []aisdk.UIMessage
	v.mustDo(200, "GET", chatPath+"/"+chat+"/messages", nil).json(&msgs)
	held := msgs[len(msgs)-1]
	p := &held.Parts[len(held.Parts)-1]
	if p.State != aisdk.StateApprovalRequested || p.Approval == nil {
		t.Fatalf("the answer's last part %+v, want its approval asked", p)
	}
	yes := true
	p.State = aisdk.StateApprovalResponded
	p.Approval = &aisdk.UIApproval{ID: p.Approval.ID, Approved: &yes}
	body := map[string]any{"id": chat, "messages": []any{msgs[0], held}, "trigger": "submit-message", "messageId": held.ID}
	answered := v.goDo("POST", chatPath, body)
	waitInputs(t, v, chat, 1)
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"tool.finished","message_id":"a1","call_id":"c1","output":"found"}]`, lease...)
	askCallApproval(v, run, lease, "c2")
	r := <-answered
	if r.status != 200 {
		t.Fatalf("the answer: %d %s", r.status, r.body)
	}
	first := parseUI(t, string(r.body))
	logLen := len(v.readLog(chat))

	r = v.do("POST", chatPath, body)
	if r.status != 200 {
		t.Fatalf("approval 1's answer sent again while approval 2 is asked: %d %s", r.status, r.body)
	}
	again := parseUI(t, string(r.body))
	if len(again) != len(first) {
		t.Fatalf("the answer sent again: %d frames, the first time %d", len(again), len(first))
	}
	for i := range first {
		if again[i].raw != first[i].raw {
			t.Fatalf("the answer sent again, frame %d: %s, the first time %s", i, again[i].raw, first[i].raw)
		}
	}
	if n := len(v.readLog(chat)); n != logLen {
		t.Fatalf("the answer sent again appended %d events", n-logLen)
	}
	no := false
	p.Approval = &aisdk.UIApproval{ID: p.Approval.ID, Approved: &no}
	if r := v.do("POST", chatPath, body); r.status != 409 || r.code() != "conflict" {
		t.Fatalf("another answer to approval 1: %d %s", r.status, r.body)
	}
	if in := v.inputsOf(chat); len(in) != 1 {
		t.Fatalf("%d run.input events, want 1", len(in))
	}
	// A message that holds approval 2 unanswered is not taken for a
	// repeat: it still says what to do.
	v.mustDo(200, "GET", chatPath+"/"+chat+"/messages", nil).json(&msgs)
	if r := v.do("POST", chatPath, map[string]any{"id": chat, "messages": []any{msgs[0], msgs[len(msgs)-1]}, "trigger": "submit-message"}); r.status != 400 || !strings.Contains(string(r.body), "addToolApprovalResponse") {
		t.Fatalf("a message that leaves approval 2 open: %d %s", r.status, r.body)
	}
}

// TestAGUICancelSentAgainAfterValue: a resume[] that cancels a request
// the run took a value for, once the run went on, is 409. It was taken
// for a cancel sent again, and stopped the run.
func TestAGUICancelSentAgainAfterValue(t *testing.T) {
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	run, _ := v.waitingRun("t1")
	v.mustDo(202, "POST", "/v1/runs/"+run+"/input", `{"request_id":"q1","value":"latency"}`)
	resume := runInput("t1", "ag-2", "", `{}`)
	resume["messages"] = []any{}
	resume["resume"] = []any{map[string]any{"interruptId": "q1", "status": "cancelled"}}
	if r := v.do("POST", "/v1/ag-ui/ext", resume); r.status != 409 || r.code() != "conflict" {
		t.Fatalf("a cancel of the answered q1: %d %s", r.status, r.body)
	}
	var snap struct{ Run tether.Run }
	v.mustDo(200, "GET", "/v1/runs/"+run, nil).json(&snap)
	if snap.Run.Status != tether.RunRunning || !snap.Run.CancelRequestedAt.IsZero() {
		t.Fatalf("the run after the refused cancel: %+v", snap.Run)
	}
}

// TestAISDKOutputRepeatedWhileNextAsked: useChat's output to a request's
// part (addToolOutput) sent again while the run asks its next request.
func TestAISDKOutputRepeatedWhileNextAsked(t *testing.T) {
	const chat = "out2"
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	ask := func(run string, lease []string, id string) {
		v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"run.waiting","request":{"id":"`+id+`","kind":"input","payload":{"prompt":"Which?"}}}]`, lease...)
	}
	run, lease := v.extChat(chat, func(run string, lease []string) { ask(run, lease, "q1") })
	var msgs []map[string]any
	v.mustDo(200, "GET", chatPath+"/"+chat+"/messages", nil).json(&msgs)
	held := msgs[len(msgs)-1]
	parts := held["parts"].([]any)
	req := parts[len(parts)-1].(map[string]any)
	if req["toolCallId"] != "q1" {
		t.Fatalf("the answer's last part %v, want request q1's", req)
	}
	req["state"], req["output"] = "output-available", "latency"
	body := map[string]any{"id": chat, "messages": []any{msgs[0], held}, "trigger": "submit-message"}
	answered := v.goDo("POST", chatPath, body)
	waitInputs(t, v, chat, 1)
	ask(run, lease, "q2")
	r := <-answered
	if r.status != 200 {
		t.Fatalf("the answer: %d %s", r.status, r.body)
	}
	first := parseUI(t, string(r.body))
	r = v.do("POST", chatPath, body)
	if r.status != 200 {
		t.Fatalf("q1's output sent again while q2 is asked: %d %s", r.status, r.body)
	}
	if again := parseUI(t, string(r.body)); len(again) != len(first) || again[len(again)-1].raw != first[len(first)-1].raw {
		t.Fatalf("the output sent again streams %d frames, the first time %d", len(again), len(first))
	}
	if in := v.inputsOf(chat); len(in) != 1 {
		t.Fatalf("%d run.input events, want 1", len(in))
	}
	req["output"] = "throughput"
	if r := v.do("POST", chatPath, body); r.status != 409 || r.code() != "conflict" {
		t.Fatalf("another output for q1: %d %s", r.status, r.body)
	}
}

// TestAISDKOutputRepeatedWhileApprovalOfShownCallAsked: the message that
// answered request q1 already showed tool call c2 (started with it, not
// yet asked about); sent again once the run asks c2's approval, it is
// still the answer to q1 it repeats: it holds c2's part, but not the
// approval, which came after it.
func TestAISDKOutputRepeatedWhileApprovalOfShownCallAsked(t *testing.T) {
	const chat = "outc"
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	run, lease := v.extChat(chat, func(run string, lease []string) {
		v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[`+
			`{"type":"tool.started","message_id":"a1","call_id":"c2","name":"search"},`+
			`{"type":"run.waiting","request":{"id":"q1","kind":"input","payload":{"prompt":"Which?"}}}]`, lease...)
	})
	var msgs []map[string]any
	v.mustDo(200, "GET", chatPath+"/"+chat+"/messages", nil).json(&msgs)
	held := msgs[len(msgs)-1]
	parts := held["parts"].([]any)
	req := parts[len(parts)-1].(map[string]any)
	if req["toolCallId"] != "q1" {
		t.Fatalf("the answer's last part %v, want request q1's", req)
	}
	req["state"], req["output"] = "output-available", "latency"
	body := map[string]any{"id": chat, "messages": []any{msgs[0], held}, "trigger": "submit-message"}
	answered := v.goDo("POST", chatPath, body)
	waitInputs(t, v, chat, 1)
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"run.waiting","request":{"id":"ap-c2","kind":"approval","payload":{"tool":"search","call_id":"c2"}}}]`, lease...)
	if r := <-answered; r.status != 200 {
		t.Fatalf("the answer: %d %s", r.status, r.body)
	}
	logLen := len(v.readLog(chat))
	if r := v.do("POST", chatPath, body); r.status != 200 {
		t.Fatalf("q1's output sent again while c2's approval is asked: %d %s", r.status, r.body)
	}
	if n := len(v.readLog(chat)); n != logLen {
		t.Fatalf("the output sent again appended %d events", n-logLen)
	}
	// A message that shows c2's approval asked but not answered is 400.
	v.mustDo(200, "GET", chatPath+"/"+chat+"/messages", nil).json(&msgs)
	body["messages"] = []any{msgs[0], msgs[len(msgs)-1]}
	if r := v.do("POST", chatPath, body); r.status != 400 || !strings.Contains(string(r.body), "waits for the approval") {
		t.Fatalf("a message with c2's approval asked, unanswered: %d %s", r.status, r.body)
	}
}

// TestAISDKOutputRepeatedBeforeAnyMessage: the run asked request q1
// before it had an assistant message (the client's message is then named
// by the run), answered, started its answer and asks q2: q1's output sent
// again is the answer it repeats, as it is once the run no longer waits.
func TestAISDKOutputRepeatedBeforeAnyMessage(t *testing.T) {
	const chat = "outr"
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	asked := v.goDo("POST", chatPath, chatBody(chat, []any{userMsg("u1", "ask twice")}, `{}`))
	run, lease := v.claimExt()
	v.mustDo(200, "POST", "/v1/runs/"+run.ID+"/events", `[{"type":"run.waiting","request":{"id":"q1","kind":"input","payload":{"prompt":"Which?"}}}]`, lease...)
	if r := <-asked; r.status != 200 {
		t.Fatalf("the question: %d %s", r.status, r.body)
	}
	var msgs []map[string]any
	v.mustDo(200, "GET", chatPath+"/"+chat+"/messages", nil).json(&msgs)
	held := msgs[len(msgs)-1]
	parts := held["parts"].([]any)
	req := parts[len(parts)-1].(map[string]any)
	if req["toolCallId"] != "q1" {
		t.Fatalf("the answer's last part %v, want request q1's", req)
	}
	req["state"], req["output"] = "output-available", "latency"
	body := map[string]any{"id": chat, "messages": []any{msgs[0], held}, "trigger": "submit-message"}
	answered := v.goDo("POST", chatPath, body)
	waitInputs(t, v, chat, 1)
	v.mustDo(200, "POST", "/v1/runs/"+run.ID+"/events", `[`+
		`{"type":"message.started","message_id":"a1","role":"assistant"},`+
		`{"type":"text.delta","message_id":"a1","delta":"So: "},`+
		`{"type":"run.waiting","request":{"id":"q2","kind":"input","payload":{"prompt":"And?"}}}]`, lease...)
	if r := <-answered; r.status != 200 {
		t.Fatalf("the answer: %d %s", r.status, r.body)
	}
	logLen := len(v.readLog(chat))
	if r := v.do("POST", chatPath, body); r.status != 200 {
		t.Fatalf("q1's output sent again while q2 is asked: %d %s", r.status, r.body)
	}
	if n := len(v.readLog(chat)); n != logLen {
		t.Fatalf("the output sent again appended %d events", n-logLen)
	}
	req["output"] = "throughput"
	if r := v.do("POST", chatPath, body); r.status != 409 || r.code() != "conflict" {
		t.Fatalf("another output for q1: %d %s", r.status, r.body)
	}
}
