package api_test

import (
	"encoding/json"
	"testing"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
)

// A stop button on an AG-UI page (TetherAgent.cancelRun) asks the thread's
// run to end, through the AG-UI routes: an AG-UI client's abort is only a
// disconnect, which a durable run outlives.
func TestAGUICancel(t *testing.T) {
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	v.mustDo(201, "POST", "/v1/threads", `{"id":"tA"}`)
	v.mustDo(201, "POST", "/v1/threads", `{"id":"tB"}`)
	// No run yet: nothing to cancel.
	v.mustDo(204, "POST", "/v1/ag-ui/threads/tA/runs/current/cancel", nil)
	var a, b struct{ ID string }
	mustJSON(t, v.mustDo(201, "POST", "/v1/threads/tA/runs", `{"agent":"ext","input":{"messages":[{"role":"user","content":"hi"}]}}`).body, &a)
	mustJSON(t, v.mustDo(201, "POST", "/v1/threads/tB/runs", `{"agent":"ext","input":{"messages":[{"role":"user","content":"hi"}]}}`).body, &b)
	// A run of another thread, and no such run: not found.
	v.mustDo(404, "POST", "/v1/ag-ui/threads/tA/runs/"+b.ID+"/cancel", nil)
	v.mustDo(404, "POST", "/v1/ag-ui/threads/tA/runs/run_none/cancel", nil)
	v.mustDo(404, "POST", "/v1/ag-ui/threads/nope/runs/"+a.ID+"/cancel", nil)
	// No such thread yet (a stop before the first run): nothing to cancel.
	v.mustDo(204, "POST", "/v1/ag-ui/threads/nope/runs/current/cancel", nil)

	var run struct{ ID, Status string }
	mustJSON(t, v.mustDo(202, "POST", "/v1/ag-ui/threads/tA/runs/current/cancel", nil).body, &run)
	if run.ID != a.ID {
		t.Fatalf("cancelled %s, want the thread's run %s", run.ID, a.ID)
	}
	// A pending run ends cancelled at once; tB's run goes on.
	var got struct{ Run struct{ Status string } }
	mustJSON(t, v.mustDo(200, "GET", "/v1/runs/"+a.ID, nil).body, &got)
	if got.Run.Status != "cancelled" {
		t.Fatalf("run %s after cancel: %s", a.ID, got.Run.Status)
	}
	mustJSON(t, v.mustDo(200, "GET", "/v1/runs/"+b.ID, nil).body, &got)
	if got.Run.Status != "pending" {
		t.Fatalf("the other thread's run: %s", got.Run.Status)
	}
	mustJSON(t, v.mustDo(202, "POST", "/v1/ag-ui/threads/tB/runs/"+b.ID+"/cancel", nil).body, &run)
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
}
