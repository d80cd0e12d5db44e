package api_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
)

// reloadEnv is a server with an admin key and a client key, whose streams
// beat often, with thread tA (a run of agent ext waiting for a worker, so
// that streams stay open).
func reloadEnv(t *testing.T) *env {
	t.Helper()
	v := newEnvEngine(t, api.Options{Keys: []api.Key{
		{Role: api.RoleAdmin, Token: "admin-token-0123456789", Name: "ops"},
		{Role: api.RoleClient, Token: "client-token-0123456789", Name: "app"},
	}, Heartbeat: 40 * time.Millisecond}, engine.Options{})
	v.mustDo(201, "POST", "/v1/threads", `{"id":"tA"}`, bearer("client-token-0123456789")...)
	v.mustDo(201, "POST", "/v1/threads/tA/runs", `{"agent":"ext","input":{"messages":[{"role":"user","content":"hi"}]}}`, bearer("client-token-0123456789")...)
	return v
}

// onlyAdmin is the keys after a reload that revoked the client key.
var onlyAdmin = []api.Key{{Role: api.RoleAdmin, Token: "admin-token-0123456789", Name: "ops"}}

// A stream opened with a key that a reload removes ends as at a token's
// exp, on every surface: before, it read on for as long as its connection
// lasted, though every new request of the key was refused.
func TestStreamsEndWhenTheirKeyIsRevoked(t *testing.T) {
	client := bearer("client-token-0123456789")
	for _, c := range []struct{ name, path, last string }{
		{"thread events", "/v1/threads/tA/events", "reconnect"},
		{"ag-ui thread", "/v1/ag-ui/threads/tA/events", ""},
		{"ai-sdk stream", "/v1/ai-sdk/ext/chat/tA/stream", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := reloadEnv(t)
			s := v.sse("GET", c.path, nil, client...)
			if _, err := s.next(); err != nil {
				t.Fatal(err)
			}
			if err := v.srv.ReloadAuth(onlyAdmin, api.TokenOptions{}); err != nil {
				t.Fatal(err)
			}
			var last frame
			for n := 0; ; n++ {
				f, err := s.next()
				if err != nil {
					break
				}
				if n == 250 { // ~10 s of pings
					t.Fatal("the revoked key's stream is still open")
				}
				if !f.comment && f.event != "ping" {
					last = f
				}
			}
			if c.last != "" && (last.event != c.last || last.data != `{"reason":"token_expired"}`) {
				t.Fatalf("last frame %+v, want reconnect token_expired", last)
			}
			v.mustDo(401, "GET", "/v1/threads/tA", nil, client...)
		})
	}
	t.Run("websocket", func(t *testing.T) {
		v := reloadEnv(t)
		w := v.ws("", client...)
		w.subscribe("a", "thread_id", "tA", "after", "now")
		w.expect("subscribed", "a")
		if err := v.srv.ReloadAuth(onlyAdmin, api.TokenOptions{}); err != nil {
			t.Fatal(err)
		}
		for n := 0; ; n++ {
			if n == 250 {
				t.Fatal("the revoked key's socket is still open")
			}
			m, err := w.next()
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				if ce.Code != 4001 {
					t.Fatalf("closed with %v, want 4001 token_expired", ce)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Op == "end" && m.Reason != "token_expired" {
				t.Fatalf("end frame %s, want token_expired", m.raw)
			}
		}
	})
}

// A key whose role a reload changes is judged by its new role, and its
// streams end; a key the reload keeps as it was goes on.
func TestReloadChangesRoles(t *testing.T) {
	v := reloadEnv(t)
	admin := bearer("admin-token-0123456789")
	s := v.sse("GET", "/v1/threads/tA/events", nil, admin...)
	if _, err := s.next(); err != nil {
		t.Fatal(err)
	}
	if err := v.srv.ReloadAuth([]api.Key{
		{Role: api.RoleAdmin, Token: "admin-token-0123456789", Name: "ops"},
		{Role: api.RoleWorker, Token: "client-token-0123456789", Name: "app"},
	}, api.TokenOptions{}); err != nil {
		t.Fatal(err)
	}
	v.mustDo(403, "GET", "/v1/threads/tA", nil, bearer("client-token-0123456789")...)
	v.mustDo(200, "GET", "/v1/threads/tA", nil, admin...)
	// The admin's stream sees pings, not an end, over several beats.
	for range 5 {
		f, err := s.next()
		if err != nil || f.event == "reconnect" {
			t.Fatalf("the kept key's stream ended: %+v %v", f, err)
		}
	}
}

// What a reload refuses, keeping the keys held: a set with no key (a keys
// file emptied by mistake must not turn auth off), a server started without
// auth, and signed-token settings every token would fail.
func TestReloadRefuses(t *testing.T) {
	v := reloadEnv(t)
	for _, c := range []struct {
		name   string
		tokens api.TokenOptions
		want   string
	}{
		{"no key", api.TokenOptions{}, "no key"},
		{"short secret", api.TokenOptions{Secret: []byte("short")}, "at least 32 bytes"},
	} {
		if err := v.srv.ReloadAuth(nil, c.tokens); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	v.mustDo(200, "GET", "/v1/threads/tA", nil, bearer("client-token-0123456789")...)

	open := newEnv(t, api.Options{})
	if err := open.srv.ReloadAuth(onlyAdmin, api.TokenOptions{}); err == nil || !strings.Contains(err.Error(), "auth is off") {
		t.Fatalf("reload on a server without auth: %v", err)
	}
	open.mustDo(200, "GET", "/v1/threads", nil)
}
