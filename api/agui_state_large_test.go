package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/runs"
)

// TestAGUIFrontEndStateOverAnEvent: a thread's state may grow to 8 MiB
// (an agent's deltas add up), and a page keeps it as its state and edits
// it between runs. The edited state was written as a state.snapshot, one
// event, refused over the largest event (1 MiB): the run was refused 413
// "event 1 (state.snapshot)", and so was every later one, since the page
// sends its edited state with each. What the edit changes is written
// instead (a state.delta), when the whole state does not fit in an event.
// A state that fits neither way is refused with what the page sent named,
// before a new thread is made.
func TestAGUIFrontEndStateOverAnEvent(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.mustDo(204, "POST", "/v1/workers/claim", `{"worker_id":"w1","agents":["graph"],"wait_ms":0}`)
	big := strings.Repeat("x", 700<<10)
	// run sends state with a run of agent graph; the worker that claims
	// it appends events and finishes. It returns the claim's state.
	var frames []aguiFrame
	run := func(id string, sent any, events ...any) json.RawMessage {
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
		for _, ev := range append(events, map[string]any{"type": "run.finished", "status": "done"}) {
			b, _ := json.Marshal([]any{ev})
			v.mustDo(200, "POST", "/v1/runs/"+claim.Run.ID+"/events", string(b), "Tether-Lease", claim.Lease.Token)
		}
		var err error
		if frames, err = a.all(); err != io.EOF {
			t.Fatal(err)
		}
		return claim.State
	}
	// The agent writes two documents of 700 KiB, one delta each: the
	// state is 1.4 MiB, more than one event holds.
	run("run-1", map[string]any{},
		map[string]any{"type": "state.snapshot", "state": map[string]any{"a": big, "todo": []any{"x"}, "n": 1}},
		map[string]any{"type": "state.delta", "patch": []any{map[string]any{"op": "add", "path": "/b", "value": big}}})
	// The page edits a small part of it and sends it with the next run.
	edited := map[string]any{"a": big, "todo": []any{"x", "y"}, "n": 2, "b": big, "new": true}
	want, _ := json.Marshal(edited)
	var before tether.Snapshot
	v.mustDo(200, "GET", "/v1/threads/t1", nil).json(&before)
	got := run("run-2", edited)
	if !sameJSONValue(got, want) {
		t.Fatalf("run-2 started with a state of %d bytes, not the edited one", len(got))
	}
	// The run's stream shows the change after RUN_STARTED: a page that
	// held the state before (another tab) has the edited one.
	if len(frames) < 2 || typeOf(frames[0]) != "RUN_STARTED" || typeOf(frames[1]) != "STATE_DELTA" {
		t.Fatalf("run-2's stream starts %v", frames[:min(2, len(frames))])
	}
	patch, _ := json.Marshal(frames[1].event["delta"])
	if after, err := runs.ApplyPatch(before.State, patch); err != nil || !sameJSONValue(after, want) {
		t.Fatalf("the stream's STATE_DELTA does not make the edited state: %v", err)
	}
	var snap tether.Snapshot
	v.mustDo(200, "GET", "/v1/threads/t1", nil).json(&snap)
	if !sameJSONValue(snap.State, want) {
		t.Fatalf("the thread's state is not the edited one")
	}
	// Members left out are removed, and a document can be too.
	for i, edited := range []map[string]any{
		{"a": big, "b": big, "n": 3},
		{"a": big, "todo": []any{}, "n": 4},
	} {
		want, _ = json.Marshal(edited)
		if got := run(fmt.Sprintf("run-%d", i+3), edited); !sameJSONValue(got, want) {
			t.Fatalf("run-%d started with a state of %d bytes, not the edited one", i+3, len(got))
		}
	}

	// A page's state that no event can hold on a new thread: 413 naming
	// the state, and nothing made.
	in := runInput("t2", "run-1", "go", `{}`)
	in["state"] = map[string]any{"doc": strings.Repeat("x", 2<<20)}
	r := v.do("POST", "/v1/ag-ui/demo", in)
	if r.status != 413 || r.code() != "too_large" || !strings.Contains(string(r.body), "state") || strings.Contains(string(r.body), "event 1") {
		t.Fatalf("a state of 2 MiB on a new thread: %d %.300s", r.status, r.body)
	}
	v.mustDo(404, "GET", "/v1/threads/t2", nil)
}

// sameJSONValue reports whether a and b are the same JSON value.
func sameJSONValue(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
