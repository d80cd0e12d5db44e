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
