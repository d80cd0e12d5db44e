package e2e

import (
	"context"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// The limit flags of the real binary: with keys, a key over --limit-threads
// gets 429 rate_limited with Retry-After and creates nothing; without keys,
// the one user on loopback is never limited; a bad rate is refused at
// start.
func TestLimitFlags(t *testing.T) {
	const token = "e2e-token-0123456789abcdef"
	auth := []string{"Authorization", "Bearer " + token}
	s := start(t, "", "--token", token, "--limit-threads", "2/h")
	s.mustCall(http.MethodPost, "/v1/threads", map[string]any{"id": "t1"}, http.StatusCreated, nil, auth...)
	s.mustCall(http.MethodPost, "/v1/threads", map[string]any{"id": "t2"}, http.StatusCreated, nil, auth...)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL+"/v1/threads", nil)
	req.Header.Set(auth[0], auth[1])
	res, err := s.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if n, _ := strconv.Atoi(res.Header.Get("Retry-After")); res.StatusCode != http.StatusTooManyRequests || n < 1 {
		t.Fatalf("third thread: %d, Retry-After %q; want 429 and a number of seconds", res.StatusCode, res.Header.Get("Retry-After"))
	}
	if got := s.metric(t, `tether_limited_total{limit="threads"}`); got != 1 {
		t.Fatalf("tether_limited_total{limit=\"threads\"} = %v, want 1", got)
	}
	if status, _, _ := s.call(context.Background(), http.MethodGet, "/v1/threads/t3", nil, auth...); status != http.StatusNotFound {
		t.Fatalf("GET the refused thread: %d, want 404", status)
	}

	open := start(t, "", "--limit-threads", "1/h")
	for _, id := range []string{"a", "b", "c"} {
		open.mustCall(http.MethodPost, "/v1/threads", map[string]any{"id": id}, http.StatusCreated, nil)
	}

	cmd := exec.Command(bin, "serve", "--data", t.TempDir(), "--addr", freeAddr(t), "--limit-runs", "10/d")
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--limit-runs") {
		t.Fatalf("a bad rate: %v\n%s", err, out)
	}
}
