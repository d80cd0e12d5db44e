package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	tether "github.com/tetherhq/tether"
)

// The real binary with only --jwt-secret-file (and --jwt-audience) takes
// users' signed tokens: each user sees its own threads, an expired token
// is 401 token_expired, no token 401; and ownership survives a kill -9
// and a restart (it is in the store, not in memory).
func TestSignedTokens(t *testing.T) {
	dir := t.TempDir()
	secret := "an-e2e-secret-of-more-than-32-bytes"
	path := filepath.Join(dir, "secret")
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, "", "--jwt-secret-file", path, "--jwt-audience", "e2e")
	mint := func(sub string, exp time.Time) []string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub, "aud": "e2e", "exp": exp.Unix()}).SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		return []string{"Authorization", "Bearer " + tok}
	}
	hour := time.Now().Add(time.Hour)
	alice, bob := mint("alice", hour), mint("bob", hour)

	var th tether.Thread
	s.mustCall("POST", "/v1/threads", map[string]any{"id": "t-alice"}, http.StatusCreated, &th, alice...)
	if th.Owner != "alice" {
		t.Fatalf("created %+v", th)
	}
	s.mustCall("POST", "/v1/threads/t-alice/runs", map[string]any{"agent": "demo", "input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}}, http.StatusCreated, nil, alice...)
	check := func() {
		t.Helper()
		s.mustCall("GET", "/v1/threads/t-alice", nil, http.StatusOK, nil, alice...)
		s.mustCall("GET", "/v1/threads/t-alice", nil, http.StatusNotFound, nil, bob...)
		var page struct{ Threads []tether.Thread }
		s.mustCall("GET", "/v1/threads", nil, http.StatusOK, &page, bob...)
		if len(page.Threads) != 0 {
			t.Fatalf("user B lists %+v", page.Threads)
		}
		s.mustCall("GET", "/v1/threads", nil, http.StatusUnauthorized, nil)
		status, body, err := s.call(t.Context(), "GET", "/v1/threads", nil, mint("alice", time.Now().Add(-time.Hour))...)
		if err != nil || status != http.StatusUnauthorized || !strings.Contains(string(body), `"token_expired"`) {
			t.Fatalf("expired token: %d %s %v", status, body, err)
		}
	}
	check()
	s.kill9()
	s.restart()
	check()
}
