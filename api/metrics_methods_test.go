package api_test

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/tetherhq/tether/api"
)

// TestMetricsMethodLabelIsBounded: the method label of
// tether_http_requests_total takes the standard methods only, so that a
// client without a token cannot grow /metrics (and the server's memory)
// one series per made-up method.
func TestMetricsMethodLabelIsBounded(t *testing.T) {
	v := newEnv(t, api.Options{Keys: []api.Key{{Token: "admin-token-0123456789", Role: api.RoleAdmin}}})
	for i := range 50 {
		m := fmt.Sprintf("MADEUP%d", i)
		for _, path := range []string{"/", "/v1/threads", "/v1/stream/x"} {
			if r := v.do(m, path, nil); r.status < 400 {
				t.Fatalf("%s %s: status %d", m, path, r.status)
			}
		}
	}
	body := string(v.mustDo(200, "GET", "/metrics", nil).body)
	methods := map[string]bool{}
	for _, m := range regexp.MustCompile(`tether_http_requests_total\{[^}]*method="([^"]*)"`).FindAllStringSubmatch(body, -1) {
		methods[m[1]] = true
	}
	for m := range methods {
		switch m {
		case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE", "other":
		default:
			t.Errorf("method label %q: want the standard methods and \"other\" only (%d labels)", m, len(methods))
			return
		}
	}
	if !methods["other"] {
		t.Errorf("no method=\"other\" series: %v", methods)
	}
}
