package api_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/internal/testutil"
)

// docs/operations.md, "Logs": one line per request, "health and page
// requests at debug level, /metrics not at all". A load balancer polls
// /readyz every few seconds; its requests were logged at info, one line
// each, because the level was chosen by a route name without its method.
func TestRequestLogLevels(t *testing.T) {
	var logs testutil.SyncBuffer
	v := newEnv(t, api.Options{Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	want := map[string]string{ // request id: the level of its line ("" for none)
		"healthz": "DEBUG", "readyz": "DEBUG", "page": "DEBUG", "page-file": "DEBUG",
		"metrics": "", "threads": "INFO",
	}
	v.mustDo(200, "GET", "/healthz", nil, "X-Request-Id", "healthz")
	v.mustDo(200, "GET", "/readyz", nil, "X-Request-Id", "readyz")
	v.do("GET", "/", nil, "X-Request-Id", "page")
	v.do("GET", "/no-such-file.js", nil, "X-Request-Id", "page-file")
	v.mustDo(200, "GET", "/metrics", nil, "X-Request-Id", "metrics")
	v.mustDo(200, "GET", "/v1/threads", nil, "X-Request-Id", "threads")
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m struct {
			Msg, Level string
			RequestID  string `json:"request_id"`
		}
		if json.Unmarshal([]byte(l), &m) == nil && m.Msg == "request" {
			if _, ok := want[m.RequestID]; ok {
				if got[m.RequestID] != "" {
					t.Errorf("request %s logged twice", m.RequestID)
				}
				got[m.RequestID] = m.Level
			}
		}
	}
	for id, level := range want {
		if got[id] != level {
			t.Errorf("request %s logged at %q, want %q", id, got[id], level)
		}
	}
}
