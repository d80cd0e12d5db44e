package api_test

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
)

// TestAGUIStateDeepestSentBack: whatever state a thread keeps, an AG-UI
// front end can send back (RunAgentInput.state, one level inside the
// body, whose nesting is bounded to 256 levels): the state is bounded to
// 255 levels, and the append that would nest it deeper is refused there,
// 413 too_large saying so. A state 256 levels deep was kept, and every
// later run of its front end refused 400 (the body 257 levels deep).
func TestAGUIStateDeepestSentBack(t *testing.T) {
	v := newEnv(t, api.Options{})
	path, lease := stateRun(t, v)
	nested := func(n int) string { return strings.Repeat(`{"x":`, n) + "1" + strings.Repeat("}", n) }
	v.mustDo(200, "POST", path, `[{"type":"state.snapshot","state":`+nested(200)+`}]`, lease...)
	at := strings.Repeat("/x", 199) + "/y" // a member of the 200th level
	r := v.do("POST", path, `[{"type":"state.delta","patch":[{"op":"add","path":"`+at+`","value":`+nested(56)+`}]}]`, lease...)
	if r.status != 413 || r.code() != "too_large" || !strings.Contains(string(r.body), "255 levels") {
		t.Fatalf("a patch making the state 256 levels deep: %d %s", r.status, r.body)
	}
	v.mustDo(200, "POST", path, `[{"type":"state.delta","patch":[{"op":"add","path":"`+at+`","value":`+nested(55)+`}]},{"type":"run.finished","status":"done"}]`, lease...)

	var snap tether.Snapshot
	v.mustDo(200, "GET", "/v1/threads/t1", nil).json(&snap)
	in := runInput("t1", "ag-1", "go on", `{"tokens":1,"delay_ms":0}`)
	in["state"] = json.RawMessage(snap.State)
	if _, err := v.agui("POST", "/v1/ag-ui/demo", in).all(); err != io.EOF {
		t.Fatalf("the run with the state sent back: %v", err)
	}
	// A state of 255 levels from the front end is taken too; 256 cannot
	// come in a body.
	in = runInput("t1", "ag-2", "and again", `{"tokens":1,"delay_ms":0}`)
	in["state"] = json.RawMessage(nested(255))
	if _, err := v.agui("POST", "/v1/ag-ui/demo", in).all(); err != io.EOF {
		t.Fatalf("the run with a state of 255 levels: %v", err)
	}
}
