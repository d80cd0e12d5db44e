package api_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/internal/testutil"
)

// TestStalledBodyIsCut: a request body must arrive within
// Limits.BodyTimeout. Before, a client with any token could announce a
// large body and never send it, holding its share of the server-wide body
// budget for as long as it kept the connection: two such requests made
// every write of every client wait and fail 503.
func TestStalledBodyIsCut(t *testing.T) {
	v := newEnv(t, api.Options{Keys: []api.Key{{Token: clientToken, Role: api.RoleClient}},
		// No share per principal: the one key's two bodies take the whole budget.
		Limits: api.Limits{BodyTimeout: 3 * time.Second, BodyWait: time.Minute, BodyBytesPerPrincipal: -1}})
	var conns []*bufio.Reader
	for range 2 {
		conns = append(conns, stalledBody(t, v.url, "/v1/threads", clientToken, `{"`, 20*time.Second))
	}
	testutil.Eventually(t, 10*time.Second, "the stalled bodies hold the whole budget", func() bool {
		return strings.Contains(string(v.mustDo(200, "GET", "/metrics", nil).body), "tether_body_bytes_in_flight 8.388608e+06\n")
	})
	// Writes go on: the stalled bodies give their budget back at their
	// deadline (the wait for it is a minute).
	v.mustDo(201, "POST", "/v1/threads", map[string]any{"id": "t1"}, "Authorization", "Bearer "+clientToken)
	for _, br := range conns {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("a body never sent: no answer: %v", err)
		}
		var body [512]byte
		n, _ := res.Body.Read(body[:])
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body[:n]), `"bad_request"`) {
			t.Fatalf("a body never sent: %d %s, want 400 bad_request", res.StatusCode, body[:n])
		}
	}
	// A request whose body arrived in time is not cut once it is read.
	s := v.sse("POST", "/v1/threads/t1/runs/stream", map[string]any{"agent": "demo", "input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}, "metadata": map[string]any{"demo": map[string]any{"tokens": 10, "delay_ms": 50}}},
		"Authorization", "Bearer "+clientToken)
	defer s.close()
	for {
		f, err := s.next()
		if err != nil {
			t.Fatalf("the run's stream ended before its terminal event: %v", err)
		}
		if f.event == "run.finished" {
			break
		}
	}
}

// stalledBody sends a POST to path that announces a body of 4 MiB (the
// default --max-body) and sends only sent of it, and returns the
// connection's reader for the answer. The connection closes with the
// test; its reads time out after wait, only so that a failing test ends.
func stalledBody(t *testing.T, url, path, token, sent string, wait time.Duration) *bufio.Reader {
	t.Helper()
	host := strings.TrimPrefix(url, "http://")
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, host, token, 4<<20, sent)
	_ = c.SetReadDeadline(time.Now().Add(wait))
	return bufio.NewReader(c)
}
