package e2e

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// raw makes one request with exactly the given headers (Host too, when
// set) and returns the status and body.
func (s *server) raw(t testing.TB, method, path, body string, header ...string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	res, err := s.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// crossSite are the headers a browser sends with a "simple" cross-origin
// POST from a page on evil.example: no preflight, so before the fix the
// server acted on it.
var crossSite = []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors",
	"Content-Type", "text/plain;charset=UTF-8"}

// TestCrossSiteRequestsRefused: on the default server (loopback, no keys),
// another site's page can neither change anything through a visitor's
// browser nor, after rebinding its name to 127.0.0.1, read anything;
// same-origin pages and non-browser clients (curl -d, the CLI) still work.
func TestCrossSiteRequestsRefused(t *testing.T) {
	s := start(t, "")
	_, port, _ := net.SplitHostPort(s.addr)

	// Cross-site writes, as a page's form or fetch(no-cors) sends them.
	for _, c := range []struct{ path, body string }{
		{"/v1/threads", `{"id":"pwned"}`},
		{"/v1/threads/pwned/runs", `{"input":{"messages":[{"role":"user","content":"spend the key"}]}}`},
		{"/v1/runs/run_x/cancel", ``},
	} {
		if st, b := s.raw(t, "POST", c.path, c.body, crossSite...); st != 403 || !strings.Contains(b, `"forbidden"`) {
			t.Errorf("cross-site POST %s: %d %s, want 403 forbidden", c.path, st, b)
		}
	}
	// A browser that sends only Origin (no Sec-Fetch-Site), a form post.
	if st, b := s.raw(t, "POST", "/v1/threads", "id=pwned", "Origin", "http://evil.example",
		"Content-Type", "application/x-www-form-urlencoded"); st != 403 {
		t.Errorf("cross-origin form POST: %d %s", st, b)
	}
	// Durable Streams writes too.
	if st, b := s.raw(t, "PUT", "/v1/stream/pwned", "x", crossSite...); st != 403 {
		t.Errorf("cross-site PUT /v1/stream/: %d %s", st, b)
	}
	if st, _ := s.raw(t, "GET", "/v1/threads/pwned", ""); st != 404 {
		t.Fatalf("a cross-site request created thread pwned (GET: %d)", st)
	}

	// DNS rebinding: the page's own name, resolved to 127.0.0.1.
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/threads", ""},
		{"GET", "/", ""},
		{"POST", "/v1/threads", `{"id":"rebound"}`},
	} {
		st, b := s.raw(t, c.method, c.path, c.body, "Host", "evil.example:"+port, "Origin", "http://evil.example:"+port,
			"Sec-Fetch-Site", "same-origin", "Content-Type", "application/json")
		if st != 400 || !strings.Contains(b, `"bad_request"`) || !strings.Contains(b, "Host") {
			t.Errorf("%s %s with Host evil.example: %d %s, want 400 naming the Host", c.method, c.path, st, b)
		}
	}

	// The page on its own origin (any loopback name) works.
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "tether.localhost:" + port, "[::1]:" + port, "127.1.2.3"} {
		st, b := s.raw(t, "POST", "/v1/threads", `{}`, "Host", host, "Origin", "http://"+host,
			"Sec-Fetch-Site", "same-origin", "Content-Type", "application/json")
		if st != 201 {
			t.Errorf("same-origin POST with Host %s: %d %s", host, st, b)
		}
	}
	// A browser must declare its JSON: text/plain from the page is refused.
	if st, b := s.raw(t, "POST", "/v1/threads", `{}`, "Origin", s.URL, "Sec-Fetch-Site", "same-origin", "Content-Type", "text/plain"); st != 400 {
		t.Errorf("same-origin text/plain POST: %d %s", st, b)
	}
	// curl -d (form-encoded) and text/plain without browser headers still work.
	for _, ct := range []string{"application/x-www-form-urlencoded", "text/plain", ""} {
		if st, b := s.raw(t, "POST", "/v1/threads", `{}`, "Content-Type", ct); st != 201 {
			t.Errorf("non-browser POST as %q: %d %s", ct, st, b)
		}
	}
	if out, err := exec.Command("curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", s.URL+"/v1/threads", "-d", `{"id":"curl-made"}`).Output(); err == nil && string(out) != "201" {
		t.Errorf("curl -d: %s", out)
	}
}

// TestCrossSiteTrustedOrigins: --cors-origins names origins whose pages may
// write; --allowed-hosts adds Host names (a local proxy's).
func TestCrossSiteTrustedOrigins(t *testing.T) {
	s := start(t, "", "--cors-origins", "https://app.example", "--allowed-hosts", "chat.internal")
	if st, b := s.raw(t, "POST", "/v1/threads", `{}`, "Origin", "https://app.example", "Sec-Fetch-Site", "cross-site",
		"Content-Type", "application/json"); st != 201 {
		t.Errorf("POST from a --cors-origins origin: %d %s", st, b)
	}
	if st, b := s.raw(t, "POST", "/v1/threads", `{}`, "Origin", "https://other.example", "Sec-Fetch-Site", "cross-site",
		"Content-Type", "application/json"); st != 403 {
		t.Errorf("POST from another origin: %d %s", st, b)
	}
	if st, b := s.raw(t, "GET", "/v1/threads", "", "Host", "chat.internal"); st != 200 {
		t.Errorf("GET with an --allowed-hosts Host: %d %s", st, b)
	}
	if st, b := s.raw(t, "GET", "/v1/threads", "", "Host", "chat.internal.evil.example"); st != 400 {
		t.Errorf("GET with another Host: %d %s", st, b)
	}
}

// TestDebugServerGuarded: the pprof server answers only on loopback unless
// the operator insists, needs the admin token when keys are set, and never
// prints the command line (which holds --token).
func TestDebugServerGuarded(t *testing.T) {
	const token = "admin-secret-token-0123456789"
	// A non-loopback debug address is refused at start.
	cmd := exec.Command(bin, "serve", "--addr", freeAddr(t), "--data", t.TempDir(), "--debug-addr", "0.0.0.0:0")
	cmd.Env = cleanEnv()
	setDeathSignal(cmd)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err == nil || !strings.Contains(out.String(), "debug") {
			t.Errorf("serve with a public --debug-addr: %v\n%s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Errorf("serve started with --debug-addr 0.0.0.0:0 (no --debug-public):\n%s", out.String())
	}

	debug := freeAddr(t)
	s := start(t, "", "--token", token, "--debug-addr", debug)
	get := func(path string, header ...string) (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+debug+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := s.hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if st, b := get("/debug/pprof/"); st != 401 {
		t.Errorf("pprof without a token: %d %.200s", st, b)
	}
	admin := []string{"Authorization", "Bearer " + token}
	if st, b := get("/debug/pprof/", admin...); st != 200 || !strings.Contains(b, "goroutine") {
		t.Errorf("pprof with the admin token: %d %.200s", st, b)
	}
	if st, b := get("/debug/pprof/goroutine?debug=1", admin...); st != 200 || strings.Contains(b, token) {
		t.Errorf("goroutine profile: %d (holds the token: %v)", st, strings.Contains(b, token))
	}
	if st, b := get("/debug/pprof/cmdline", admin...); st == 200 || strings.Contains(b, token) {
		t.Errorf("cmdline: %d %q", st, b)
	}
}

// TestDataDirPrivate starts the server on a data directory that does not
// exist yet: the directory it creates holds every conversation and the
// webhook signing key, and other users of the machine must not be able to
// read or list it (the store's own directory mode is 0750).
func TestDataDirPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := start(t, dir)
	s.createThread(t)
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode&0o007 != 0 {
		t.Errorf("the data directory has mode %v: other users can read the conversations in it", mode)
	}
}

// TestEmptySigningKeyReplaced starts the server on a data directory whose
// webhook signing key file is empty, as a power loss right after the first
// start leaves a file whose data never reached the disk. No key was ever
// read from it, so nothing was signed with it: the server must make a new
// key and start, not refuse to start until someone deletes the file.
func TestEmptySigningKeyReplaced(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "webhook-signing.key")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, dir)
	s.createThread(t)
	s.stop(10 * time.Second)
	key, err := os.ReadFile(file)
	if err != nil || len(strings.TrimSpace(string(key))) == 0 {
		t.Fatalf("the key file after the start: %q %v", key, err)
	}
	s.restart() // and the key it wrote is read back
}
