package durablestreams_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tetherhq/tether/api/durablestreams"
	"github.com/tetherhq/tether/hub"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/sqlitestore"
	"github.com/tetherhq/tether/streams"
	"github.com/tetherhq/tether/streams/wake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is the handler over a real store, served by httptest.
type server struct {
	*httptest.Server
	t  testing.TB
	st *sqlitestore.Store
}

func newServer(t testing.TB, opts durablestreams.Options) *server {
	return newServerWith(t, streams.Options{}, wake.Options{}, opts)
}

func newServerWith(t testing.TB, so streams.Options, wo wake.Options, opts durablestreams.Options) *server {
	st, err := sqlitestore.Open(filepath.Join(t.TempDir(), "tether.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := hub.New(st.ReadPage, hub.Options{})
	st.SetNotify(func(c *store.Committed) { h.Publish(c.ThreadID, c.Before, c.Records) })
	var m *wake.Manager
	so.OnAppend = func(p string) { m.Notify(p) }
	so.OnDelete = func(p string) { m.Deleted(p) }
	svc := streams.New(st, h, so)
	m = wake.New(svc, st, wo)
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	opts.Wake = m
	mux := http.NewServeMux()
	mux.Handle(durablestreams.Prefix, durablestreams.New(svc, opts))
	s := &server{Server: httptest.NewServer(mux), t: t, st: st}
	t.Cleanup(func() {
		s.Close()
		m.Close()
		svc.Close()
		h.Close()
		st.Close()
	})
	return s
}

// do makes a request; headers are name, value pairs.
func (s *server) do(method, path, body string, headers ...string) (*http.Response, string) {
	s.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, s.URL+durablestreams.Prefix+path, rd)
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (s *server) want(resp *http.Response, body string, status int) {
	s.t.Helper()
	if resp.StatusCode != status {
		s.t.Fatalf("%s %s: status %d, want %d: %s", resp.Request.Method, resp.Request.URL, resp.StatusCode, status, body)
	}
}

func TestHTTPBasics(t *testing.T) {
	s := newServer(t, durablestreams.Options{})
	resp, body := s.do("PUT", "t/a", "hello", "Content-Type", "text/plain")
	s.want(resp, body, 201)
	if resp.Header.Get("Location") != "/v1/stream/t/a" || resp.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("PUT headers: %v", resp.Header)
	}
	first := resp.Header.Get("Stream-Next-Offset")
	resp, body = s.do("PUT", "t/a", "", "Content-Type", "text/plain")
	s.want(resp, body, 200)
	resp, body = s.do("PUT", "t/a", "", "Content-Type", "application/json")
	s.want(resp, body, 409)

	resp, body = s.do("POST", "t/a", " world", "Content-Type", "TEXT/PLAIN")
	s.want(resp, body, 204)
	tail := resp.Header.Get("Stream-Next-Offset")
	if tail <= first {
		t.Fatalf("offsets %s then %s", first, tail)
	}
	resp, body = s.do("GET", "t/a", "")
	s.want(resp, body, 200)
	if body != "hello world" || resp.Header.Get("Stream-Up-To-Date") != "true" || resp.Header.Get("Stream-Next-Offset") != tail {
		t.Fatalf("GET: %q %v", body, resp.Header)
	}
	etag := resp.Header.Get("ETag")
	resp, body = s.do("GET", "t/a", "", "If-None-Match", etag)
	s.want(resp, body, 304)
	resp, body = s.do("GET", "t/a?offset="+first, "")
	if body != " world" {
		t.Fatalf("GET from %s: %q", first, body)
	}
	resp, body = s.do("HEAD", "t/a", "")
	s.want(resp, body, 200)
	if resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("Stream-Next-Offset") != tail {
		t.Fatalf("HEAD: %v", resp.Header)
	}
	for _, q := range []string{"?offset=", "?offset=a&offset=b", "?offset=0,1", "?live=sse", "?live=long-poll", "?offset=-1&live=maybe"} {
		resp, body = s.do("GET", "t/a"+q, "")
		s.want(resp, body, 400)
	}
	resp, body = s.do("GET", "t/missing", "")
	s.want(resp, body, 404)
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Cross-Origin-Resource-Policy") != "cross-origin" {
		t.Fatalf("security headers on an error: %v", resp.Header)
	}
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	if json.Unmarshal([]byte(body), &e); e.Error.Code != "not_found" {
		t.Fatalf("error body %s", body)
	}
	resp, body = s.do("OPTIONS", "t/a", "", "Origin", "https://example.com", "Access-Control-Request-Method", "GET")
	if resp.StatusCode != 204 || !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "If-None-Match") {
		t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	resp, body = s.do("PATCH", "t/a", "")
	s.want(resp, body, 405)
	resp, body = s.do("DELETE", "t/a", "")
	s.want(resp, body, 204)
	resp, body = s.do("POST", "threads/t1", "{}", "Content-Type", "application/json")
	s.want(resp, body, 405)
	if resp.Header.Get("Allow") == "" {
		t.Fatal("405 without Allow")
	}
	resp, body = s.do("PUT", "big", strings.Repeat("x", 2000), "Content-Type", "text/plain")
	s.want(resp, body, 201)
}

func TestHTTPProducersAndClose(t *testing.T) {
	s := newServer(t, durablestreams.Options{})
	s.do("PUT", "p", "", "Content-Type", "text/plain")
	post := func(body, seq string, extra ...string) (*http.Response, string) {
		h := append([]string{"Content-Type", "text/plain", "Producer-Id", "w", "Producer-Epoch", "0", "Producer-Seq", seq}, extra...)
		return s.do("POST", "p", body, h...)
	}
	resp, body := post("a", "0")
	s.want(resp, body, 200)
	resp, body = post("a", "0")
	s.want(resp, body, 204)
	resp, body = post("c", "2")
	s.want(resp, body, 409)
	if resp.Header.Get("Producer-Expected-Seq") != "1" || resp.Header.Get("Producer-Received-Seq") != "2" {
		t.Fatalf("gap headers: %v", resp.Header)
	}
	for _, bad := range [][]string{{"Producer-Id", "w"}, {"Producer-Id", "w", "Producer-Epoch", "1e3", "Producer-Seq", "0"},
		{"Producer-Id", "", "Producer-Epoch", "0", "Producer-Seq", "0"}} {
		resp, body = s.do("POST", "p", "x", append([]string{"Content-Type", "text/plain"}, bad...)...)
		s.want(resp, body, 400)
	}
	resp, body = post("b", "1", "Stream-Closed", "true")
	s.want(resp, body, 200)
	tail := resp.Header.Get("Stream-Next-Offset")
	resp, body = s.do("POST", "p", "x", "Content-Type", "text/plain")
	s.want(resp, body, 409)
	if resp.Header.Get("Stream-Closed") != "true" || resp.Header.Get("Stream-Next-Offset") != tail {
		t.Fatalf("append to a closed stream: %v", resp.Header)
	}
	resp, body = s.do("GET", "p?offset="+tail+"&live=long-poll", "")
	s.want(resp, body, 204)
	if resp.Header.Get("Stream-Closed") != "true" {
		t.Fatal("long poll at the tail of a closed stream")
	}
}

func TestHTTPLongPoll(t *testing.T) {
	s := newServer(t, durablestreams.Options{LongPollTimeout: 200 * time.Millisecond})
	resp, _ := s.do("PUT", "lp", "", "Content-Type", "application/json")
	tail := resp.Header.Get("Stream-Next-Offset")
	start := time.Now()
	resp, body := s.do("GET", "lp?offset="+tail+"&live=long-poll", "")
	s.want(resp, body, 204)
	if time.Since(start) < 150*time.Millisecond || resp.Header.Get("Stream-Cursor") == "" || resp.Header.Get("Stream-Next-Offset") != tail {
		t.Fatalf("long-poll timeout after %v: %v", time.Since(start), resp.Header)
	}
	cursor := resp.Header.Get("Stream-Cursor")
	resp, body = s.do("GET", "lp?offset="+tail+"&live=long-poll&cursor="+cursor, "")
	if resp.Header.Get("Stream-Cursor") <= cursor && len(resp.Header.Get("Stream-Cursor")) <= len(cursor) {
		t.Fatalf("cursor %s after %s", resp.Header.Get("Stream-Cursor"), cursor)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		s.do("POST", "lp", `{"x":1}`, "Content-Type", "application/json")
	}()
	resp, body = s.do("GET", "lp?offset=now&live=long-poll", "")
	s.want(resp, body, 200)
	if body != `[{"x":1}]` {
		t.Fatalf("long poll: %s", body)
	}
}

// sseEvents reads SSE events until n control events, or the end.
func sseEvents(t *testing.T, url string, n int) ([][2]string, *http.Response) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var evs [][2]string
	var typ string
	var data []string
	sc := bufio.NewScanner(resp.Body)
	controls := 0
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			typ = line[7:]
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(line[5:], " "))
		case line == "":
			evs = append(evs, [2]string{typ, strings.Join(data, "\n")})
			if typ == "control" {
				controls++
			}
			typ, data = "", nil
			if controls >= n {
				return evs, resp
			}
		}
	}
	return evs, resp
}

func TestHTTPSSE(t *testing.T) {
	s := newServer(t, durablestreams.Options{})
	s.do("PUT", "txt", "safe\r\n\r\nevent: control\rdata: {\"x\":1}\n\nend", "Content-Type", "text/plain")
	evs, resp := sseEvents(t, s.URL+"/v1/stream/txt?offset=-1&live=sse", 1)
	if resp.Header.Get("Content-Type") != "text/event-stream" || len(evs) != 2 || evs[0][0] != "data" || evs[1][0] != "control" {
		t.Fatalf("events %q", evs)
	}
	if evs[0][1] != "safe\n\nevent: control\ndata: {\"x\":1}\n\nend" {
		t.Fatalf("data %q", evs[0][1])
	}
	var c map[string]any
	if json.Unmarshal([]byte(evs[1][1]), &c); c["upToDate"] != true || c["streamNextOffset"] == nil || c["x"] != nil {
		t.Fatalf("control %s", evs[1][1])
	}

	s.do("PUT", "bin", "\x00\x01\xff", "Content-Type", "application/octet-stream")
	s.do("POST", "bin", "\x02", "Content-Type", "application/octet-stream", "Stream-Closed", "true")
	evs, resp = sseEvents(t, s.URL+"/v1/stream/bin?offset=-1&live=sse", 5)
	if resp.Header.Get("Stream-SSE-Data-Encoding") != "base64" || len(evs) != 2 || evs[0][1] != "AAH/Ag==" {
		t.Fatalf("binary events %q", evs)
	}
	c = nil
	if json.Unmarshal([]byte(evs[1][1]), &c); c["streamClosed"] != true || c["streamCursor"] != nil {
		t.Fatalf("last control %s", evs[1][1])
	}

	// Live: data appended with the close arrives before the final control.
	resp, _ = s.do("PUT", "live", "a", "Content-Type", "text/plain")
	tail := resp.Header.Get("Stream-Next-Offset")
	go func() {
		time.Sleep(100 * time.Millisecond)
		s.do("POST", "live", "b", "Content-Type", "text/plain")
		s.do("POST", "live", "c", "Content-Type", "text/plain", "Stream-Closed", "true")
	}()
	evs, _ = sseEvents(t, s.URL+"/v1/stream/live?offset="+tail+"&live=sse", 10)
	var got string
	for _, ev := range evs {
		if ev[0] == "data" {
			got += ev[1]
		}
	}
	last := evs[len(evs)-1]
	if got != "bc" || last[0] != "control" || !strings.Contains(last[1], `"streamClosed":true`) {
		t.Fatalf("live events %q", evs)
	}
}
