package api_test

import (
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// A repeated Idempotency-Key returns the first run "whatever the body
// says" (protocol.md §4): also a body the server would refuse now, such
// as a retry that comes after its agent stopped being known (no worker
// asked for it in ten minutes), or one that changed its agent or its
// multitask. Nothing is appended for the retries.
func TestIdempotentRetryWhateverTheBody(t *testing.T) {
	clock := testutil.NewClock()
	v := newEnvEngine(t, api.Options{}, engine.Options{AcceptAgent: func(n string) bool { return n == "demo" }, Now: clock.Now})
	v.mustDo(204, "POST", "/v1/workers/claim", `{"worker_id":"w","agents":["ext"],"wait_ms":0}`)
	v.thread("t1")
	body := `{"agent":"ext","input":{"messages":[{"role":"user","content":"hi"}]}}`
	var first tether.Run
	v.mustDo(201, "POST", "/v1/threads/t1/runs", body, "Idempotency-Key", "k").json(&first)
	n := logLen(t, v, "t1")

	clock.Advance(11 * time.Minute) // "ext" is no longer known
	for _, retry := range []string{
		body,
		`{"agent":"typo"}`,
		`{"agent":"ext","multitask":"sometimes"}`,
		`{"agent":"ext","input":{"messages":[{"role":"robot","content":"hi"}]}}`,
	} {
		var again tether.Run
		r := v.do("POST", "/v1/threads/t1/runs", retry, "Idempotency-Key", "k")
		if r.status != 200 {
			t.Fatalf("retry %s: %d %s, want 200 with run %s", retry, r.status, r.body, first.ID)
		}
		r.json(&again)
		if again.ID != first.ID {
			t.Fatalf("retry %s: run %s, want %s", retry, again.ID, first.ID)
		}
	}
	// Without the key, the same bodies are refused.
	v.mustDo(400, "POST", "/v1/threads/t1/runs", body)
	if m := logLen(t, v, "t1"); m != n {
		t.Fatalf("the log grew from %d to %d events", n, m)
	}
}
