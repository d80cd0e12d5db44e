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

// A stop button pressed before the first run made the thread (AG-UI's
// …/runs/current/cancel, the AI SDK's …/stop) has no run to end: 204, as
// docs/ag-ui.md and docs/ai-sdk.md say, with a user's token too (where
// TetherAgent.cancelRun threw not_found instead of resolving false). So
// that a user learns nothing of another's thread, its stop is answered
// the same, and its run goes on.
func TestStopBeforeTheFirstRun(t *testing.T) {
	v := newEnv(t, api.Options{})
	for _, path := range []string{"/v1/ag-ui/threads/fresh/runs/current/cancel", "/v1/ai-sdk/demo/chat/fresh/stop"} {
		if r := v.do("POST", path, nil); r.status != 204 {
			t.Errorf("without keys: POST %s: %d %s, want 204", path, r.status, r.body)
		}
	}

	var c clock
	v = newTokenEnv(t, &c, api.Options{})
	f := v.tokenFixture(&c)
	for _, tok := range []string{f.alice, f.bob} {
		for _, path := range []string{"/v1/ag-ui/threads/fresh/runs/current/cancel", "/v1/ai-sdk/demo/chat/fresh/stop"} {
			if r := v.do("POST", path, nil, bearer(tok)...); r.status != 204 {
				t.Errorf("POST %s: %d %s, want 204", path, r.status, r.body)
			}
		}
	}
	// User B stops user A's thread tA, whose run is active: as a thread
	// that does not exist.
	for _, path := range []string{"/v1/ag-ui/threads/tA/runs/current/cancel", "/v1/ai-sdk/demo/chat/tA/stop"} {
		if r := v.do("POST", path, nil, bearer(f.bob)...); r.status != 204 {
			t.Errorf("user B: POST %s: %d %s, want 204", path, r.status, r.body)
		}
	}
	var run struct {
		Run struct {
			CancelRequestedAt *string `json:"cancel_requested_at"`
		}
	}
	v.mustDo(200, "GET", "/v1/runs/"+f.runID, nil, bearer(f.alice)...).json(&run)
	if run.Run.CancelRequestedAt != nil {
		t.Fatal("user B cancelled user A's run")
	}
	// A run named by id stays not found to user B.
	v.mustDo(404, "POST", "/v1/ag-ui/threads/tA/runs/"+f.runID+"/cancel", nil, bearer(f.bob)...)
}
