package api_test

import (
	"net/http"
	"testing"

	"github.com/tetherhq/tether/api"
)

// Every response carries X-Request-Id, the client's if it sent one
// (protocol.md §1): also those answered before a route is found (a Host
// that is refused, two Authorization headers, a CORS preflight) and
// /metrics, which carried none.
func TestEveryResponseHasRequestID(t *testing.T) {
	v := newEnv(t, api.Options{LoopbackHosts: true, CORSOrigins: []string{"http://app.example"}})
	cases := []struct {
		name, method, path string
		status             int
		hdr                map[string][]string
	}{
		{"a route", "GET", "/v1/threads", 200, nil},
		{"metrics", "GET", "/metrics", 200, nil},
		{"health", "GET", "/healthz", 200, nil},
		{"a Host refused", "GET", "/v1/threads", 400, map[string][]string{"Host": {"evil.example"}}},
		{"two Authorization headers", "GET", "/v1/threads", 400, map[string][]string{"Authorization": {"Bearer a", "Bearer b"}}},
		{"a preflight", "OPTIONS", "/v1/threads", 204, map[string][]string{"Origin": {"http://app.example"}, "Access-Control-Request-Method": {"POST"}}},
	}
	for _, c := range cases {
		for _, sent := range []string{"", "my-request-1"} {
			req, _ := http.NewRequest(c.method, v.url+c.path, nil)
			for k, vs := range c.hdr {
				if k == "Host" {
					req.Host = vs[0]
					continue
				}
				req.Header[k] = vs
			}
			if sent != "" {
				req.Header.Set("X-Request-Id", sent)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			got := res.Header.Get("X-Request-Id")
			switch {
			case res.StatusCode != c.status:
				t.Errorf("%s: status %d, want %d", c.name, res.StatusCode, c.status)
			case got == "":
				t.Errorf("%s (X-Request-Id sent: %q): no X-Request-Id in the answer", c.name, sent)
			case sent != "" && got != sent:
				t.Errorf("%s: X-Request-Id %q, want the client's %q", c.name, got, sent)
			}
		}
	}
}
