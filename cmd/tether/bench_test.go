package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// newBenchServer starts a real server (SQLite store, engine, API) in
// process.
func newBenchServer(t *testing.T) string {
	t.Helper()
	st := testutil.OpenStore(t, "")
	e := engine.New(st, engine.Options{AcceptAgent: func(string) bool { return false }})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := api.New(e, api.Options{})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Shutdown()
		hs.Close()
		e.Close()
	})
	return hs.URL
}

// TestBench runs every scenario briefly against a real server and checks
// that each reports sane numbers. It asserts no speed: benchmarks are not
// tests.
func TestBench(t *testing.T) {
	url := newBenchServer(t)
	env := func(k string) string {
		if k == "TETHER_SERVER" {
			return url
		}
		return ""
	}
	var stdout, stderr bytes.Buffer
	args := []string{"--scenario", "all", "--json", "--duration", "1s", "--threads", "3", "--concurrency", "4",
		"--batch", "5", "--subscribers", "5", "--rate", "2000", "--connections", "20"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, append([]string{"bench"}, args...), env, &stdout, &stderr); err != nil {
		t.Fatalf("bench: %v\nstderr:\n%s", err, stderr.String())
	}
	var out struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("summary is not JSON: %v\n%s", err, stdout.String())
	}
	got := map[string]map[string]any{}
	for _, r := range out.Results {
		got[r["scenario"].(string)] = r
	}
	num := func(scenario, field string) float64 {
		t.Helper()
		v, ok := got[scenario][field].(float64)
		if !ok {
			t.Fatalf("%s: no number %s in %v", scenario, field, got[scenario])
		}
		return v
	}
	positive := func(scenario string, fields ...string) {
		t.Helper()
		for _, f := range fields {
			if num(scenario, f) <= 0 {
				t.Errorf("%s: %s = %v, want > 0", scenario, f, num(scenario, f))
			}
		}
	}
	zero := func(scenario string, fields ...string) {
		t.Helper()
		for _, f := range fields {
			if num(scenario, f) != 0 {
				t.Errorf("%s: %s = %v, want 0", scenario, f, num(scenario, f))
			}
		}
	}
	positive("append", "events", "requests", "events_per_sec", "requests_per_sec")
	zero("append", "errors")
	if e, r := num("append", "events"), num("append", "requests"); e != 5*r {
		t.Errorf("append: %v events in %v requests of 5", e, r)
	}
	positive("fanout", "appended", "delivered", "delivered_per_sec")
	zero("fanout", "errors", "out_of_order")
	if got["fanout"]["complete"] != true {
		t.Errorf("fanout: not every subscriber got every event: %v", got["fanout"])
	}
	if a, d := num("fanout", "appended"), num("fanout", "delivered"); d != 5*a {
		t.Errorf("fanout: %v delivered for %v appended to 5 subscribers", d, a)
	}
	positive("latency", "sent", "received")
	zero("latency", "errors")
	if s, r := num("latency", "sent"), num("latency", "received"); s != r {
		t.Errorf("latency: sent %v, received %v", s, r)
	}
	if l, ok := got["latency"]["delivery_latency"].(map[string]any); !ok || l["count"].(float64) <= 0 || l["p50_ms"].(float64) <= 0 {
		t.Errorf("latency: delivery latency %v", got["latency"]["delivery_latency"])
	}
	if n := num("idle", "server_streams"); n != 20 {
		t.Errorf("idle: the server had %v streams open, want 20", n)
	}
	positive("idle", "rss_after_bytes", "goroutines_per_connection")
	// The scenarios say what they do on stderr. (Not the lines printed each
	// second: a 1 s run on a loaded machine may end before its first.)
	for _, want := range []string{"append: 4 worker(s)", "fanout: appending", "latency: sending", "idle: opening"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr has no %q:\n%s", want, stderr.String())
		}
	}
}

// TestBenchIdleSockets holds idle WebSockets, one subscription each.
func TestBenchIdleSockets(t *testing.T) {
	url := newBenchServer(t)
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "--server", url, "--scenario", "idle", "--transport", "ws", "--connections", "12", "--duration", "1s", "--json"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, args, func(string) string { return "" }, &stdout, &stderr); err != nil {
		t.Fatalf("bench: %v\nstderr:\n%s", err, stderr.String())
	}
	var out struct {
		Results []struct {
			Transport   string  `json:"transport"`
			Connections int     `json:"connections"`
			Open        float64 `json:"server_streams"`
		} `json:"results"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || len(out.Results) != 1 {
		t.Fatalf("summary: %v\n%s", err, stdout.String())
	}
	if r := out.Results[0]; r.Transport != "ws" || r.Connections != 12 || r.Open != 12 {
		t.Fatalf("idle over WebSockets: %+v, want 12 sockets open on the server", r)
	}
}

// TestBenchTable checks the human summary.
func TestBenchTable(t *testing.T) {
	url := newBenchServer(t)
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "--server", url, "--duration", "300ms", "--threads", "2"}
	if err := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"append: 2 thread(s), 16 in flight, 10 delta event(s)", "events/s", "request latency", "p99"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("summary has no %q:\n%s", want, stdout.String())
		}
	}
}

// TestBenchErrors checks that a server that is down or refuses gives one
// clear line.
func TestBenchErrors(t *testing.T) {
	url := newBenchServer(t)
	down := httptest.NewServer(nil)
	downURL := down.URL
	down.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--server", downURL}, "cannot reach the server at " + downURL + ": connection refused"},
		{[]string{"--server", url, "--scenario", "nope"}, "--scenario must be one of"},
		{[]string{"--server", url, "--batch", "0"}, "--batch must be at least 1"},
		{[]string{"--server", url, "--scenario", "idle", "--transport", "grpc"}, "--transport must be sse or ws"},
		{[]string{"--server", "localhost:1"}, "--server must be an http:// or https:// URL"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"bench", "--duration", "100ms"}, tc.args...), func(string) string { return "" }, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
		if strings.Contains(err.Error(), "goroutine") || strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("%v: error is not one line: %v", tc.args, err)
		}
	}
}

// TestBenchRefused checks the error of a server that refuses the token.
func TestBenchRefused(t *testing.T) {
	st := testutil.OpenStore(t, "")
	e := engine.New(st, engine.Options{})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := api.New(e, api.Options{Keys: []api.Key{{Token: "0123456789abcdef0123", Role: api.RoleAdmin}}})
	hs := httptest.NewServer(srv.Handler())
	defer func() {
		srv.Shutdown()
		hs.Close()
		e.Close()
	}()
	for _, scenario := range []string{"append", "idle"} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), []string{"bench", "--server", hs.URL, "--token", "wrong-token-wrong-token", "--scenario", scenario,
			"--duration", "100ms", "--connections", "2"}, func(string) string { return "" }, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), "unauthorized") {
			t.Errorf("%s: err = %v, want unauthorized", scenario, err)
		}
	}
}
