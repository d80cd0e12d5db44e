package api_test

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
)

// TestAGUIFrontEndState: in AG-UI the client's state is the agent's input.
// A front end that shares its state with the agent (CopilotKit's
// useCoAgent and its setState) edits it between runs and sends it with
// the next: the run's agent must start with it. It did not: once the
// thread had a state, the request's was ignored, and the agent got the
// state it had left. The edited state becomes the thread's, in the append
// that creates the run; a request refused changes nothing.
func TestAGUIFrontEndState(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.mustDo(204, "POST", "/v1/workers/claim", `{"worker_id":"w1","agents":["graph"],"wait_ms":0}`)
	// run sends state with a run of agent graph, and returns the state
	// the worker that claims it starts with; the worker leaves next.
	run := func(id string, sent any, next any) json.RawMessage {
		t.Helper()
		in := runInput("t1", id, "go on", `{}`)
		in["state"] = sent
		a := v.agui("POST", "/v1/ag-ui/graph", in)
		var claim struct {
			Run   tether.Run
			Lease struct{ Token string }
			State json.RawMessage
		}
		v.mustDo(200, "POST", "/v1/workers/claim", `{"worker_id":"w1","agents":["graph"],"wait_ms":5000}`).json(&claim)
		b, _ := json.Marshal([]any{map[string]any{"type": "state.snapshot", "state": next}, map[string]any{"type": "run.finished", "status": "done"}})
		v.mustDo(200, "POST", "/v1/runs/"+claim.Run.ID+"/events", string(b), "Tether-Lease", claim.Lease.Token)
		if _, err := a.all(); err != io.EOF {
			t.Fatal(err)
		}
		return claim.State
	}
	// HttpAgent's first state, {}, on a thread without one: no state.
	if got := run("run-1", map[string]any{}, map[string]any{"count": 1, "todo": []any{"a"}}); got != nil {
		t.Fatalf("run-1 started with state %s", got)
	}
	// The user edits the shared state; the next run starts with it.
	edited := map[string]any{"count": 5, "todo": []any{"a", "b"}}
	if got := run("run-2", edited, map[string]any{"count": 6}); string(got) != `{"count":5,"todo":["a","b"]}` {
		t.Fatalf("run-2 started with state %s, want the edited one", got)
	}
	// Sent back as the agent left it: the same, not written again.
	if got := run("run-3", map[string]any{"count": 6.0}, map[string]any{"count": 7}); string(got) != `{"count":6}` {
		t.Fatalf("run-3 started with state %s", got)
	}
	if n := countEvents(t, v, "t1", tether.EventStateSnapshot); n != 4 {
		t.Fatalf("%d state.snapshot events, want 4 (three workers', one edit)", n)
	}
	// The run's metadata does not keep it again.
	var snap tether.Snapshot
	v.mustDo(200, "GET", "/v1/threads/t1", nil).json(&snap)
	for _, r := range snap.Runs {
		var md struct {
			AGUI map[string]json.RawMessage `json:"ag_ui"`
		}
		_ = json.Unmarshal(r.Metadata, &md)
		if _, ok := md.AGUI["state"]; ok {
			t.Fatalf("run %s metadata %s", r.ID, r.Metadata)
		}
	}

	// A refused request (a run is active) changes nothing.
	in := runInput("t1", "run-4", "go on", `{}`)
	a := v.agui("POST", "/v1/ag-ui/graph", in)
	refused := runInput("t1", "run-5", "go on", `{}`)
	refused["state"] = map[string]any{"count": 100}
	if r := v.do("POST", "/v1/ag-ui/graph", refused); r.status != 409 || r.code() != "run_active" {
		t.Fatalf("a run while one is active: %d %s", r.status, r.body)
	}
	v.mustDo(200, "GET", "/v1/threads/t1", nil).json(&snap)
	if string(snap.State) != `{"count":7}` {
		t.Fatalf("state %s after a refused request", snap.State)
	}
	// Nor does one that creates its thread and is refused.
	bad := runInput("t9", "run-6", "go on", `{}`)
	bad["state"] = map[string]any{"count": 1}
	if r := v.do("POST", "/v1/ag-ui/nope", bad); r.status != 400 {
		t.Fatalf("unknown agent: %d %s", r.status, r.body)
	}
	v.mustDo(404, "GET", "/v1/threads/t9", nil)
	_ = a
}

// A state over the bound of a thread's state (8 MiB) is refused before
// the request's thread is made: a refused request creates nothing.
func TestAGUIFrontEndStateTooLarge(t *testing.T) {
	v := newEnv(t, api.Options{MaxBodyBytes: 16 << 20})
	in := runInput("big", "run-1", "go", `{}`)
	in["state"] = map[string]any{"doc": strings.Repeat("x", 9<<20)}
	if r := v.do("POST", "/v1/ag-ui/demo", in); r.status != 413 || r.code() != "too_large" {
		t.Fatalf("a state of 9 MiB: %d %.200s", r.status, r.body)
	}
	v.mustDo(404, "GET", "/v1/threads/big", nil)
}
