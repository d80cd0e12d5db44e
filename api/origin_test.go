package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tetherhq/tether/api"
)

// rawDo is a request with exactly these headers (Host too) and a body.
func (v *env) rawDo(method, path, body string, hdr ...string) (int, string) {
	v.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, v.url+path, rd)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		v.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestLoopbackHosts(t *testing.T) {
	v := newEnv(t, api.Options{LoopbackHosts: true, AllowedHosts: []string{"Proxy.Internal", "other:8443"}})
	for host, ok := range map[string]bool{
		"127.0.0.1": true, "127.0.0.1:8080": true, "127.9.9.9:1": true, "localhost": true, "LOCALHOST:80": true,
		"localhost.": true, "app.localhost:3000": true, "[::1]:8080": true, "[::1]": true, "[::ffff:127.0.0.1]:80": true,
		"proxy.internal": true, "proxy.internal:9999": true, "other": true,
		"evil.example": false, "localhost.evil.example": false, "127.0.0.1.evil.example": false, "10.0.0.1": false,
		"[::2]:80": false, "0.0.0.0": false, "localhostx": false,
	} {
		st, b := v.rawDo("GET", "/v1/threads", "", "Host", host)
		if ok && st != 200 {
			t.Errorf("Host %q: %d %s, want 200", host, st, b)
		}
		if !ok && (st != 400 || !strings.Contains(b, `"bad_request"`)) {
			t.Errorf("Host %q: %d %s, want 400", host, st, b)
		}
	}
	// Off by default (keys, or not on loopback).
	w := newEnv(t, api.Options{})
	if st, b := w.rawDo("GET", "/v1/threads", "", "Host", "evil.example"); st != 200 {
		t.Errorf("Host check without LoopbackHosts: %d %s", st, b)
	}
}

// Cross-origin writes are refused with keys too, and whatever the route;
// reads are not (CORS decides what a page may read).
func TestCrossOriginWithKeys(t *testing.T) {
	v := newAuthEnv(t, api.Options{CORSOrigins: []string{"https://app.example"}})
	c := append(bearer(azClient), "Content-Type", "application/json")
	for _, site := range []string{"cross-site", "same-site"} {
		hdr := append(append([]string{}, c...), "Origin", "https://evil.example", "Sec-Fetch-Site", site)
		if st, b := v.rawDo("POST", "/v1/threads", `{}`, hdr...); st != 403 || !strings.Contains(b, "cross-origin") {
			t.Errorf("%s POST with a client token: %d %s", site, st, b)
		}
		if st, b := v.rawDo("PUT", "/v1/stream/x", `{}`, hdr...); st != 403 {
			t.Errorf("%s PUT /v1/stream/: %d %s", site, st, b)
		}
		if st, b := v.rawDo("GET", "/v1/threads", "", hdr...); st != 200 {
			t.Errorf("%s GET: %d %s", site, st, b)
		}
	}
	// A null origin (sandboxed frame, file://) is another origin too.
	if st, b := v.rawDo("POST", "/v1/threads", `{}`, append(c, "Origin", "null")...); st != 403 {
		t.Errorf("Origin null: %d %s", st, b)
	}
	if st, b := v.rawDo("POST", "/v1/threads", `{}`, append(c, "Origin", "https://app.example", "Sec-Fetch-Site", "cross-site")...); st != 201 {
		t.Errorf("trusted origin: %d %s", st, b)
	}
	// "*" trusts every origin.
	star := newEnv(t, api.Options{CORSOrigins: []string{"*"}})
	if st, b := star.rawDo("POST", "/v1/threads", `{}`, "Content-Type", "application/json", "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"); st != 201 {
		t.Errorf("--cors-origins *: %d %s", st, b)
	}
}

// Browsers must declare their JSON; other clients may send it as
// text/plain, form-encoded (curl -d) or untyped.
func TestBrowserContentType(t *testing.T) {
	v := newEnv(t, api.Options{})
	same := []string{"Origin", v.url, "Sec-Fetch-Site", "same-origin"}
	for _, ct := range []string{"text/plain;charset=UTF-8", "application/x-www-form-urlencoded", ""} {
		if st, b := v.rawDo("POST", "/v1/threads", `{}`, append([]string{"Content-Type", ct}, same...)...); st != 400 || !strings.Contains(b, "application/json") {
			t.Errorf("browser POST as %q: %d %s", ct, st, b)
		}
		if st, b := v.rawDo("POST", "/v1/threads", `{}`, "Content-Type", ct); st != 201 {
			t.Errorf("non-browser POST as %q: %d %s", ct, st, b)
		}
	}
	if st, b := v.rawDo("POST", "/v1/threads", `{}`, append([]string{"Content-Type", "application/json"}, same...)...); st != 201 {
		t.Errorf("browser POST as application/json: %d %s", st, b)
	}
	// An empty body needs no type (cancel, heartbeat).
	if st, b := v.rawDo("POST", "/v1/threads", "", same...); st != 201 {
		t.Errorf("browser POST without a body: %d %s", st, b)
	}
}

func TestCheckOrigins(t *testing.T) {
	for _, o := range [][]string{nil, {"*"}, {"https://a.example", "http://localhost:5173"}, {"bad", "*"}} {
		if err := api.CheckOrigins(o); err != nil {
			t.Errorf("%q: %v", o, err)
		}
	}
	for _, o := range [][]string{{"app.example"}, {"https://a.example/path"}, {"https://a.example", "ftp//x"}} {
		if err := api.CheckOrigins(o); err == nil {
			t.Errorf("%q: accepted", o)
		}
	}
}
