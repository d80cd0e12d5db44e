package e2e

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReloadKeysOnSIGHUP: the real binary reads its --keys file again on
// SIGHUP. A key added works, a key removed is refused and its open stream
// ends as at a token's exp (reconnect, token_expired); a keys file emptied
// by mistake is refused and the keys held stay in use. Before, SIGHUP
// ended the server at once (Go's default), without its shutdown.
func TestReloadKeysOnSIGHUP(t *testing.T) {
	const (
		admin = "admin-token-of-the-e2e-test"
		old   = "client-token-to-be-revoked"
		fresh = "client-token-added-by-reload"
	)
	keys := filepath.Join(t.TempDir(), "keys")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(keys, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("admin " + admin + "\nclient " + old + " app\n")
	s := start(t, "", "--keys", keys, "--heartbeat", "200ms")
	as := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	s.mustCall("POST", "/v1/threads", map[string]any{"id": "t-reload"}, http.StatusCreated, nil, as(old)...)

	// A stream opened with the key to be revoked.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+"/v1/threads/t-reload/events", nil)
	req.Header.Set("Authorization", "Bearer "+old)
	res, err := s.hc.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("open the stream: %v %v", res, err)
	}
	defer res.Body.Close()
	ended := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(res.Body)
		var event string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "reconnect":
				ended <- strings.TrimPrefix(line, "data: ")
				return
			}
		}
		ended <- "closed without a reconnect frame: " + errString(sc.Err())
	}()

	hup := func() {
		t.Helper()
		if err := s.current().cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	write("admin " + admin + "\nclient " + fresh + " app\n")
	hup()
	waitStatus(t, s, fresh, http.StatusOK)
	s.mustCall("GET", "/v1/threads/t-reload", nil, http.StatusUnauthorized, nil, as(old)...)
	select {
	case data := <-ended:
		if !strings.Contains(data, `"token_expired"`) {
			t.Fatalf("the revoked key's stream ended with %s", data)
		}
	case <-ctx.Done():
		t.Fatal("the revoked key's stream is still open")
	}

	// A keys file emptied by mistake: refused, the keys held serve on.
	write("# nothing here yet\n")
	hup()
	waitLog(t, s, "keys not reloaded")
	s.mustCall("GET", "/v1/threads/t-reload", nil, http.StatusOK, nil, as(fresh)...)
	s.mustCall("GET", "/v1/threads/t-reload", nil, http.StatusOK, nil, as(admin)...)
	if s.current() == nil {
		t.Fatal("the server exited on SIGHUP")
	}
}

// waitStatus polls GET /v1/threads with tok until it answers want.
func waitStatus(t *testing.T, s *server, tok string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, _, err := s.call(t.Context(), "GET", "/v1/threads", nil, "Authorization", "Bearer "+tok)
		if err == nil && status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /v1/threads with the reloaded key: %d %v, want %d\n%s", status, err, want, s.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLog waits until the server's output holds text.
func waitLog(t *testing.T, s *server, text string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.out.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("the server did not log %q:\n%s", text, s.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func errString(err error) string {
	if err == nil {
		return "EOF"
	}
	return err.Error()
}
