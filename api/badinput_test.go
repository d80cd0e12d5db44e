package api_test

import (
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
)

// TestBadInput sends malformed and impossible requests. Each gets its
// documented status and code, leaks nothing, changes no log, and the server
// keeps serving.
func TestBadInput(t *testing.T) {
	v := newEnv(t, api.Options{MaxBodyBytes: 64 << 10})
	v.thread("t1")
	v.mustDo(204, "POST", "/v1/workers/claim", `{"worker_id":"w","agents":["echo"],"wait_ms":0}`)
	var run tether.Run
	v.mustDo(201, "POST", "/v1/threads/t1/runs", `{"agent":"echo"}`).json(&run)
	var claim struct {
		Lease struct{ Token string }
	}
	v.mustDo(200, "POST", "/v1/workers/claim", `{"worker_id":"w","agents":["echo"],"wait_ms":1000}`).json(&claim)
	lease := []string{"Tether-Lease", claim.Lease.Token}
	v.mustDo(200, "POST", "/v1/runs/"+run.ID+"/events", `[{"type":"message.started","message_id":"m1","role":"assistant"}]`, lease...)
	rid := "/v1/runs/" + run.ID
	big := `{"id":"big","metadata":{"x":"` + strings.Repeat("a", 70<<10) + `"}}`

	cases := []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		code                     string
	}{
		{"malformed JSON", "POST", "/v1/threads", `{"id":`, nil, 400, "bad_request"},
		{"not an object", "POST", "/v1/threads", `[1,2]`, nil, 400, "bad_request"},
		{"wrong type of id", "POST", "/v1/threads", `{"id":42}`, nil, 400, "bad_request"},
		{"unknown field", "POST", "/v1/threads", `{"id":"x","colour":"red"}`, nil, 400, "bad_request"},
		{"metadata not an object", "POST", "/v1/threads", `{"id":"x","metadata":"s"}`, nil, 400, "bad_request"},
		{"id with a slash", "POST", "/v1/threads", `{"id":"a/b"}`, nil, 400, "bad_request"},
		{"id of two dots", "POST", "/v1/threads", `{"id":".."}`, nil, 400, "bad_request"},
		{"id of one dot", "POST", "/v1/threads", `{"id":"."}`, nil, 400, "bad_request"},
		{"trailing data", "POST", "/v1/threads", `{"id":"x"} {}`, nil, 400, "bad_request"},
		{"wrong content type", "POST", "/v1/threads", `{"id":"x"}`, []string{"Content-Type", "text/html"}, 400, "bad_request"},
		{"oversized body", "POST", "/v1/threads", big, nil, 413, "too_large"},
		{"run on unknown thread", "POST", "/v1/threads/nope/runs", `{"agent":"demo"}`, nil, 404, "not_found"},
		{"unknown agent", "POST", "/v1/threads/t1/runs", `{"agent":"nobody"}`, nil, 400, "bad_request"},
		{"bad role in input", "POST", "/v1/threads/t1/runs", `{"agent":"demo","input":{"messages":[{"role":"robot","content":"x"}]}}`, nil, 400, "bad_request"},
		{"input messages not a list", "POST", "/v1/threads/t1/runs", `{"agent":"demo","input":{"messages":"hi"}}`, nil, 400, "bad_request"},
		{"bad multitask", "POST", "/v1/threads/t1/runs", `{"agent":"demo","multitask":"maybe"}`, nil, 400, "bad_request"},
		{"second active run", "POST", "/v1/threads/t1/runs", `{"agent":"demo"}`, nil, 409, "run_active"},
		{"empty run body", "POST", "/v1/threads/t1/runs", ``, nil, 400, "bad_request"},
		{"bad offset", "GET", "/v1/threads/t1/events?after=abc", "", nil, 400, "bad_request"},
		{"offset with a slash", "GET", "/v1/threads/t1/events", "", []string{"Last-Event-ID", "1/2"}, 400, "bad_request"},
		{"offset too long", "GET", "/v1/threads/t1/events?after=" + strings.Repeat("9", 300), "", nil, 400, "bad_request"},
		{"bad wait", "GET", "/v1/threads/t1/events?wait=soon", "", []string{"Accept", "application/json"}, 400, "bad_request"},
		// As SSE these end in-band, after ":ok" (TestSSEErrorAfterPreamble).
		{"unknown thread events", "GET", "/v1/threads/nope/events", "", []string{"Accept", "application/json"}, 404, "not_found"},
		{"unknown run", "GET", "/v1/runs/run_nope", "", nil, 404, "not_found"},
		{"unknown message subscription", "GET", rid + "/events?message_id=zz", "", []string{"Accept", "application/json"}, 404, "not_found"},
		{"bad list status", "GET", "/v1/threads?status=sleepy", "", nil, 400, "bad_request"},
		{"bad list limit", "GET", "/v1/threads?limit=0", "", nil, 400, "bad_request"},
		{"input when not waiting", "POST", rid + "/input", `{"request_id":"q","value":1}`, nil, 409, "conflict"},
		{"input without request_id", "POST", rid + "/input", `{"value":1}`, nil, 400, "bad_request"},
		{"append without lease", "POST", rid + "/events", `[{"type":"custom","name":"x"}]`, nil, 410, "lease_lost"},
		{"append with a wrong lease", "POST", rid + "/events", `[{"type":"custom","name":"x"}]`, []string{"Tether-Lease", "nope"}, 410, "lease_lost"},
		{"append not an array", "POST", rid + "/events", `{"type":"custom"}`, lease, 400, "bad_request"},
		{"append empty array", "POST", rid + "/events", `[]`, lease, 400, "bad_request"},
		{"append unknown event field", "POST", rid + "/events", `[{"type":"custom","name":"x","colour":1}]`, lease, 400, "bad_request"},
		{"append field of the wrong type", "POST", rid + "/events", `[{"type":"text.delta","message_id":"m1","delta":5}]`, lease, 400, "bad_request"},
		{"append delta for unknown message", "POST", rid + "/events", `[{"type":"text.delta","message_id":"zz","delta":"x"}]`, lease, 400, "bad_request"},
		{"append duplicate message", "POST", rid + "/events", `[{"type":"message.started","message_id":"m1","role":"assistant"}]`, lease, 409, "conflict"},
		{"append server-only event", "POST", rid + "/events", `[{"type":"run.started","worker_id":"x"}]`, lease, 400, "bad_request"},
		{"append null event", "POST", rid + "/events", `[null]`, lease, 400, "bad_request"},
		{"append atomic batch with a bad last event", "POST", rid + "/events", `[{"type":"text.delta","message_id":"m1","delta":"ok"},{"type":"nope"}]`, lease, 400, "bad_request"},
		{"append oversized batch", "POST", rid + "/events", `[{"type":"custom","name":"x","data":"` + strings.Repeat("b", 70<<10) + `"}]`, lease, 413, "too_large"},
		{"heartbeat wrong lease", "POST", rid + "/heartbeat", ``, []string{"Tether-Lease", "nope"}, 410, "lease_lost"},
		{"claim without agents", "POST", "/v1/workers/claim", `{"worker_id":"w"}`, nil, 400, "bad_request"},
		{"claim negative wait", "POST", "/v1/workers/claim", `{"worker_id":"w","agents":["a"],"wait_ms":-1}`, nil, 400, "bad_request"},
		// JSON values are kept as they come (metadata, state, data, an
		// answer): bytes that are not UTF-8 would be in every reader's
		// JSON, which strict decoders then refuse.
		{"thread metadata not UTF-8", "POST", "/v1/threads", "{\"id\":\"u\",\"metadata\":{\"k\":\"\xff\"}}", nil, 400, "bad_request"},
		{"run metadata not UTF-8", "POST", "/v1/threads/t1/runs", "{\"agent\":\"demo\",\"multitask\":\"enqueue\",\"metadata\":{\"k\":\"\xc0\"}}", nil, 400, "bad_request"},
		{"input value not UTF-8", "POST", rid + "/input", "{\"request_id\":\"q\",\"value\":\"\xff\xfe\"}", nil, 400, "bad_request"},
		{"append data not UTF-8", "POST", rid + "/events", "[{\"type\":\"custom\",\"name\":\"x\",\"data\":\"\xed\xa0\x80\"}]", lease, 400, "bad_request"},
		{"append state not UTF-8", "POST", rid + "/events", "[{\"type\":\"state.snapshot\",\"state\":{\"\xff\":1}}]", lease, 400, "bad_request"},
		// Nor JSON nested deeper than every client can read (Python's
		// json refuses about 1,000 levels, less its caller's stack).
		{"input value nested too deep", "POST", rid + "/input", `{"request_id":"q","value":` + nested(256) + `}`, nil, 400, "bad_request"},
		{"run metadata nested too deep", "POST", "/v1/threads/t1/runs", `{"agent":"demo","multitask":"enqueue","metadata":{"k":` + nested(255) + `}}`, nil, 400, "bad_request"},
		{"append state nested too deep", "POST", rid + "/events", `[{"type":"state.snapshot","state":` + nested(255) + `}]`, lease, 400, "bad_request"},
		{"no such route", "GET", "/v1/nothing", "", nil, 404, "not_found"},
		{"wrong method", "PUT", "/v1/threads/t1", `{}`, nil, 404, "not_found"},
	}
	before := logLen(t, v, "t1")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := v.do(tc.method, tc.path, tc.body, tc.hdr...)
			if r.status != tc.status || r.code() != tc.code {
				t.Fatalf("got %d %q, want %d %q: %s", r.status, r.code(), tc.status, tc.code, r.body)
			}
			for _, leak := range []string{"sql", "SQL", "goroutine", ".go:", "runtime.", "panic", "json: ", "tether."} {
				if strings.Contains(string(r.body), leak) {
					t.Fatalf("error leaks %q: %s", leak, r.body)
				}
			}
			if n := logLen(t, v, "t1"); n != before {
				t.Fatalf("log changed: %d events, was %d", n, before)
			}
		})
	}
	if len(cases) < 25 {
		t.Fatalf("only %d cases", len(cases))
	}
	// Still serving, and a good append still works, as deep as allowed.
	v.mustDo(200, "POST", rid+"/events", `[{"type":"text.delta","message_id":"m1","delta":"fine"}]`, lease...)
	v.mustDo(200, "POST", rid+"/events", `[{"type":"state.snapshot","state":`+nested(254)+`}]`, lease...)
}

// nested returns JSON of n arrays, one in the other, around a string that
// holds brackets (which do not count).
func nested(n int) string {
	return strings.Repeat("[", n) + `"[{\"]"` + strings.Repeat("]", n)
}

func logLen(t *testing.T, v *env, thread string) int {
	t.Helper()
	var p struct{ Events []any }
	v.mustDo(200, "GET", "/v1/threads/"+thread+"/events?after=-1", nil, "Accept", "application/json").json(&p)
	return len(p.Events)
}
