package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
)

// TestAnswerTooLarge: an answer over the largest event (a body may be
// larger: 4 MiB against 1 MiB) is 413 too_large naming the answer, its
// request and the limit, on the input route and AG-UI's resume[] alike,
// and nothing is appended. It said "event 0 (run.input) is N bytes",
// which names no field the client sent.
func TestAnswerTooLarge(t *testing.T) {
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	run, _ := v.waitingRun("t1")
	big := strings.Repeat("x", 3<<19)
	r := v.do("POST", "/v1/runs/"+run+"/input", fmt.Sprintf(`{"request_id":"q1","value":%q}`, big))
	msg := string(r.body)
	if r.status != 413 || r.code() != "too_large" || !strings.Contains(msg, `answer to request \"q1\"`) || !strings.Contains(msg, fmt.Sprint(1<<20)) || strings.Contains(msg, "event 0") {
		t.Fatalf("an answer of 1.5 MiB: %d %s", r.status, r.body)
	}
	resume := runInput("t1", "ag-2", "", `{}`)
	resume["messages"] = []any{}
	resume["resume"] = []any{map[string]any{"interruptId": "q1", "status": "resolved", "payload": big}}
	r = v.do("POST", "/v1/ag-ui/ext", resume)
	if msg := string(r.body); r.status != 413 || r.code() != "too_large" || !strings.Contains(msg, `answer to request \"q1\"`) {
		t.Fatalf("a resume[] of 1.5 MiB: %d %s", r.status, r.body)
	}
	if in := v.inputsOf("t1"); len(in) != 0 {
		t.Fatalf("%d run.input events, want none", len(in))
	}
	v.mustDo(202, "POST", "/v1/runs/"+run+"/input", `{"request_id":"q1","value":"short"}`)
}

// TestAISDKAnswerTooLarge: the AI SDK's answer to a request (a request
// part's output, addToolOutput) over the largest event is refused as the
// input route's is: 413 too_large naming its request, nothing appended,
// and a smaller answer is taken after it.
func TestAISDKAnswerTooLarge(t *testing.T) {
	const chat = "big"
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	run, lease := v.extChat(chat, func(run string, lease []string) {
		v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"run.waiting","request":{"id":"q1","kind":"input","payload":{"prompt":"Which?"}}}]`, lease...)
	})
	var msgs []map[string]any
	v.mustDo(200, "GET", chatPath+"/"+chat+"/messages", nil).json(&msgs)
	held := msgs[len(msgs)-1]
	parts := held["parts"].([]any)
	req := parts[len(parts)-1].(map[string]any)
	req["state"], req["output"] = "output-available", strings.Repeat("x", 3<<19)
	body := map[string]any{"id": chat, "messages": []any{msgs[0], held}, "trigger": "submit-message"}
	r := v.do("POST", chatPath, body)
	if msg := string(r.body); r.status != 413 || r.code() != "too_large" || !strings.Contains(msg, `answer to request \"q1\"`) || !strings.Contains(msg, fmt.Sprint(1<<20)) {
		t.Fatalf("an output of 1.5 MiB: %d %s", r.status, r.body)
	}
	if in := v.inputsOf(chat); len(in) != 0 {
		t.Fatalf("%d run.input events, want none", len(in))
	}
	req["output"] = "short"
	answered := v.goDo("POST", chatPath, body)
	waitInputs(t, v, chat, 1)
	v.finishExt(run, lease, "a1")
	if r := <-answered; r.status != 200 {
		t.Fatalf("the smaller answer: %d %s", r.status, r.body)
	}
}
