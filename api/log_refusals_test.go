package api_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/internal/testutil"
)

// A request the server refuses by design to shed load (the budget of
// bodies in flight is full: 503 unavailable, counted in
// tether_limited_total) is logged as one request line, at info like a 429,
// not as a failure of the server: a client that keeps the budget full
// would otherwise fill the error log, two error lines per refused request
// ("request failed" and the request line), and page whoever alerts on it.
func TestLoadSheddingIsNotLoggedAsAFailure(t *testing.T) {
	var logs testutil.SyncBuffer
	v := newAuthEnv(t, api.Options{
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Limits: api.Limits{BodyBytes: 4 << 20, BodyBytesPerPrincipal: -1, BodyWait: 100 * time.Millisecond, BodyTimeout: time.Minute},
	})
	// One body of 4 MiB announced, a few bytes sent: it holds the budget.
	stalledBody(t, v.url, "/v1/threads", azClient, `{"`, 30*time.Second)
	testutil.Eventually(t, 10*time.Second, "the body is let in", func() bool { return api.BodyBytesInUse(v.srv) == 4<<20 })

	r := v.do("POST", "/v1/threads", `{"id":"t1"}`, append(bearer(azAdmin), "X-Request-Id", "shed-1")...)
	if r.status != 503 || r.code() != "unavailable" {
		t.Fatalf("a body while the budget is full: %d %s, want 503 unavailable", r.status, r.body)
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["request_id"] == "shed-1" {
			lines = append(lines, m)
		}
	}
	if len(lines) != 1 || lines[0]["msg"] != "request" || lines[0]["level"] != "INFO" || lines[0]["status"] != float64(503) {
		t.Fatalf("the refusal is logged as %v, want one request line at INFO with status 503", lines)
	}
}
