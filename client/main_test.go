package client

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// seen is one request a test server received.
type seen struct {
	Method string
	Path   string // as sent (escaped)
	Query  string
	Header http.Header
	Body   string
}

// recorder keeps the requests of a test server.
type recorder struct {
	mu   sync.Mutex
	reqs []seen
}

func (r *recorder) add(req *http.Request) (n int, s seen) {
	body, _ := io.ReadAll(req.Body)
	s = seen{req.Method, req.URL.EscapedPath(), req.URL.RawQuery, req.Header.Clone(), string(body)}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, s)
	return len(r.reqs), s
}

func (r *recorder) all() []seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]seen(nil), r.reqs...)
}

// serve starts a test server whose handler gets the request's number
// (from 1) and what was received, and a client of it with short backoffs.
func serve(t *testing.T, h func(n int, s seen, w http.ResponseWriter, r *http.Request)) (*Client, *recorder) {
	t.Helper()
	return serveOn(t, nil, h)
}

// serveOn is serve over the in-memory connections of pl if it is not nil
// (for a test in a synctest bubble).
func serveOn(t *testing.T, pl *pipeListener, h func(n int, s seen, w http.ResponseWriter, r *http.Request)) (*Client, *recorder) {
	t.Helper()
	rec := &recorder{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, s := rec.add(r)
		h(n, s, w, r)
	}))
	opts := &Options{Token: "sekret", MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	if pl != nil {
		srv.Listener.Close()
		srv.Listener = pl
		tr := &http.Transport{DialContext: pl.dial}
		t.Cleanup(tr.CloseIdleConnections)
		opts.HTTPClient = &http.Client{Transport: tr}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return New(srv.URL+"/", opts), rec
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}
