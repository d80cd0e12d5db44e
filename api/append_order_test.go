package api_test

import (
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
)

// An append's refusals come in the order protocol.md §6 gives (unknown run,
// finished run, lease, then the events), for every check of the events: a
// worker whose lease is lost learns that, whatever its events hold, and so
// does one whose run is gone.
func TestAppendChecksInOrder(t *testing.T) {
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	v.mustDo(204, "POST", "/v1/workers/claim", `{"worker_id":"w","agents":["ext"],"wait_ms":0}`)
	v.thread("t1")
	var run, done tether.Run
	v.mustDo(201, "POST", "/v1/threads/t1/runs", `{"agent":"ext"}`).json(&done)
	var claim struct{ Lease struct{ Token string } }
	v.mustDo(200, "POST", "/v1/workers/claim", `{"worker_id":"w","agents":["ext"],"wait_ms":1000}`).json(&claim)
	v.mustDo(200, "POST", "/v1/runs/"+done.ID+"/events", `[{"type":"run.finished","status":"done"}]`, "Tether-Lease", claim.Lease.Token)
	doneToken := claim.Lease.Token
	v.mustDo(201, "POST", "/v1/threads/t1/runs", `{"agent":"ext"}`).json(&run)
	v.mustDo(200, "POST", "/v1/workers/claim", `{"worker_id":"w","agents":["ext"],"wait_ms":1000}`).json(&claim)

	for _, body := range []string{
		`[{"type":"custom"}]`, // no name
		`[{"type":"run.created"}]`,
		`[{"type":"run.finished","status":"aborted"}]`,
		`[{"type":"custom","name":"x","offset":"1"}]`,
		`[{"type":"custom","name":"x","ts":"2026-01-01T00:00:00.000Z"}]`,
		`[{"type":"custom","name":"x","run_id":"run_other"}]`,
		`[{"type":"custom","name":"x"},{"type":"run.started","worker_id":"w"}]`,
		// Events that cannot be read at all are faults of the events too.
		`[{"type":"nope"}]`,
		`[{"type":"custom","name":"x","colour":1}]`,
		`[{"type":"text.delta","message_id":"m1","delta":5}]`,
		`[null]`,
		`[]`,
		`{"type":"custom","name":"x"}`,
		`[{"type":"custom","name":"x"}`,
	} {
		for _, c := range []struct {
			run, token string
			status     int
			code       tether.Code
		}{
			{"run_unknown", claim.Lease.Token, 404, tether.CodeNotFound},
			{done.ID, doneToken, 409, tether.CodeConflict},
			{run.ID, "not-the-lease", 410, tether.CodeLeaseLost},
			{run.ID, claim.Lease.Token, 400, tether.CodeBadRequest},
		} {
			r := v.do("POST", "/v1/runs/"+c.run+"/events", body, "Tether-Lease", c.token)
			if r.status != c.status || r.code() != string(c.code) {
				t.Errorf("%s to %s: %d %s, want %d %s", body, c.run, r.status, r.body, c.status, c.code)
			}
		}
	}
	if n := logLen(t, v, "t1"); n != 5 {
		t.Fatalf("log has %d events, want 5", n)
	}
}
