package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestListenDebug(t *testing.T) {
	ln, err := listenDebug("127.0.0.1:0", false, false)
	if err != nil {
		t.Fatalf("loopback: %v", err)
	}
	ln.Close()
	if ln, err := listenDebug("0.0.0.0:0", false, true); err == nil || !strings.Contains(err.Error(), "--debug-public") {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("a public address without --debug-public: %v", err)
	}
	if ln, err := listenDebug("0.0.0.0:0", true, false); err == nil || !strings.Contains(err.Error(), "keys") {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("a public address without keys: %v", err)
	}
	ln, err = listenDebug("0.0.0.0:0", true, true)
	if err != nil {
		t.Fatalf("a public address, insisted on, with keys: %v", err)
	}
	ln.Close()
}

// The debug server never prints the command line (it holds --token), and
// bounds how long a client may take to send its headers.
func TestDebugServer(t *testing.T) {
	srv := debugServer(debugHandler(), slog.New(slog.DiscardHandler))
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.IdleTimeout <= 0 || srv.MaxHeaderBytes <= 0 {
		t.Fatalf("unbounded: %+v", srv)
	}
	hs := httptest.NewServer(srv.Handler)
	defer hs.Close()
	for path, want := range map[string]int{"/debug/pprof/": 200, "/debug/pprof/cmdline": 404, "/debug/pprof/goroutine?debug=1": 200} {
		res, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, res.StatusCode, want)
		}
		if strings.Contains(string(b), "-test.") {
			t.Errorf("GET %s shows the command line: %.200s", path, b)
		}
	}
}
