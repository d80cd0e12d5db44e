package api_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
)

// latencyCount returns the count of tether_http_request_duration_seconds
// for route, once a request of that route has been counted in
// tether_http_requests_total (the two are recorded together, after the
// handler returns, which may be after the client has its answer).
func (v *env) latencyCount(route string) string {
	v.t.Helper()
	counted := regexp.MustCompile(`(?m)^tether_http_requests_total\{[^}]*route="` + regexp.QuoteMeta(route) + `"`)
	count := regexp.MustCompile(`(?m)^tether_http_request_duration_seconds_count\{route="` + regexp.QuoteMeta(route) + `"\} (\d+)$`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		body := string(v.mustDo(200, "GET", "/metrics", nil).body)
		if counted.MatchString(body) {
			if m := count.FindStringSubmatch(body); m != nil {
				return m[1]
			}
			return "none"
		}
		if time.Now().After(deadline) {
			v.t.Fatalf("no request of %s was counted:\n%s", route, body)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// tether_http_request_duration_seconds is the latency of non-streaming
// requests (docs/operations.md): a 201 or a 204 is one; an AG-UI run or an
// AI SDK chat answered with its stream is not, nor is a long poll. Only
// 200s were observed, streams of POST routes among them, so a run's
// creation was missing and the histogram held whole runs.
func TestLatencyOfNonStreamingRequests(t *testing.T) {
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	v.mustDo(201, "POST", "/v1/threads", `{"id":"t1"}`)
	if _, err := v.agui("POST", "/v1/ag-ui/demo", runInput("t1", "run-1", "q", `{"tokens":3,"delay_ms":0}`)).all(); err != nil && !strings.Contains(err.Error(), "EOF") {
		t.Fatal(err)
	}
	chat := `{"id":"c1","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"q"}]}],"trigger":"submit-message","metadata":{"demo":{"tokens":3,"delay_ms":0}}}`
	v.mustDo(200, "POST", "/v1/ai-sdk/demo/chat", chat)
	v.mustDo(201, "POST", "/v1/threads", `{"id":"w"}`)
	v.mustDo(201, "POST", "/v1/threads/w/runs", `{"agent":"ext","input":{"messages":[{"role":"user","content":"q"}]}}`)
	v.mustDo(200, "POST", "/v1/workers/claim", `{"worker_id":"w1","agents":["ext"],"wait_ms":1000}`)
	v.mustDo(201, "POST", "/v1/threads", `{"id":"t2"}`)
	for _, c := range []struct{ route, want string }{
		{"POST /v1/threads", "3"},
		{"POST /v1/threads/{tid}/runs", "1"},
		{"POST /v1/ag-ui/{agent}", "none"},
		{"POST /v1/ai-sdk/{agent}/chat", "none"},
		{"POST /v1/workers/claim", "none"},
	} {
		if got := v.latencyCount(c.route); got != c.want {
			t.Errorf("%s: %s observed in the latency histogram, want %s", c.route, got, c.want)
		}
	}
}

// A Durable Streams long poll and SSE read are streams; a plain read is
// not.
func TestLatencyOfDurableStreamsReads(t *testing.T) {
	v := newStreamsEnv(t)
	auth := []string{"Authorization", "Bearer " + clientToken}
	v.mustDo(201, "PUT", "/v1/stream/s/1", `{"a":1}`, append(auth, "Content-Type", "application/json")...)
	v.mustDo(204, "GET", "/v1/stream/s/1?offset=now&live=long-poll", nil, auth...)
	if got := v.latencyCount("/v1/stream/"); got != "1" {
		t.Errorf("/v1/stream/: %s observed after a create and a long poll, want 1 (the create)", got)
	}
	v.mustDo(200, "GET", "/v1/stream/s/1?offset=-1", nil, auth...)
	v.mustDo(201, "PUT", "/v1/stream/s/2", `{"a":1}`, append(auth, "Content-Type", "application/json")...)
	if got := v.latencyCount("/v1/stream/"); got != "3" {
		t.Errorf("/v1/stream/: %s observed after two creates, a read and a long poll, want 3", got)
	}
}
