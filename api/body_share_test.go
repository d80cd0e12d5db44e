package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/internal/testutil"
)

// TestBodyShare: one principal may not hold the whole body budget. A
// client key announces large bodies and sends them slowly (each within
// the body timeout); a worker's small append, under another key, still
// passes, and the client's request over its share waits, then gets the
// budget's answer: 503 unavailable with Retry-After. Before, the client's
// two bodies took the whole budget (2 × --max-body) and the worker's
// append waited, then got 503.
func TestBodyShare(t *testing.T) {
	v := newAuthEnv(t, api.Options{Limits: api.Limits{BodyWait: 2 * time.Second, BodyTimeout: time.Minute}})
	c := v.workerRun("t1", azWorker)
	// Two bodies of 4 MiB announced, a few bytes sent: the first is let
	// in, the second is over the client's share and waits (before, it was
	// let in too).
	first := stalledBody(t, v.url, "/v1/threads", azClient, `{"`, 30*time.Second)
	testutil.Eventually(t, 10*time.Second, "the first body is let in", func() bool {
		return api.BodyBytesInUse(v.srv) == 4<<20
	})
	second := stalledBody(t, v.url, "/v1/threads", azClient, `{"`, 30*time.Second)
	testutil.Eventually(t, 10*time.Second, "the second body is let in or waits", func() bool {
		return api.BodyBytesInUse(v.srv) == 8<<20 || api.BodyRequestsWaiting(v.srv) == 1
	})

	// The worker's append passes, at once, while the client's bodies are held.
	r := v.do("POST", "/v1/runs/"+c.Run.ID+"/events", `[{"type":"message.started","message_id":"m1","role":"assistant"}]`,
		append(bearer(azWorker), "Tether-Lease", c.Lease.Token)...)
	if r.status != 200 {
		t.Fatalf("another principal's small append while one principal holds large bodies: %d %s, want 200", r.status, r.body)
	}

	// The body over the share is refused as a full budget refuses.
	res, err := http.ReadResponse(second, nil)
	if err != nil {
		t.Fatalf("the body over the share: no answer: %v", err)
	}
	var body [512]byte
	n, _ := res.Body.Read(body[:])
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body[:n]), `"unavailable"`) {
		t.Fatalf("the body over the share: %d %s, want 503 unavailable", res.StatusCode, body[:n])
	}
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("the body over the share: Retry-After %q", res.Header.Get("Retry-After"))
	}
	m := string(v.mustDo(200, "GET", "/metrics", nil, bearer(azAdmin)...).body)
	if !strings.Contains(m, `tether_limited_total{limit="body_share"} 1`+"\n") || !strings.Contains(m, `tether_limited_total{limit="body_budget"} 0`+"\n") {
		t.Fatalf("metrics do not count the refusal as body_share:\n%s", m)
	}
	_ = first
}
