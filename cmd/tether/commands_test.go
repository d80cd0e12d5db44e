package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/agents/demo"
	"github.com/tetherhq/tether/agents/runner"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/client"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

var quiet = slog.New(slog.DiscardHandler)

// realServer is a real server (SQLite under t.TempDir(), the demo agent in
// process) over httptest.
func realServer(t *testing.T) (string, *client.Client) {
	t.Helper()
	e := engine.New(testutil.OpenStore(t, ""), engine.Options{AcceptAgent: func(n string) bool { return n == demo.Name }, Logger: quiet})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	rn := runner.New(e, map[string]agents.Agent{demo.Name: demo.New()}, runner.Options{Logger: quiet})
	rn.Start()
	srv := api.New(e, api.Options{Logger: quiet})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rn.Shutdown(ctx)
		srv.Shutdown()
		hs.Close()
		e.Close()
	})
	return hs.URL, client.New(hs.URL, nil)
}

// cli runs one command line of tether and returns its stdout, stderr and error.
func cli(t *testing.T, server string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(testCtx(t), args, envOf("TETHER_SERVER", server), &out, &errOut)
	return out.String(), errOut.String(), err
}

func startDemo(t *testing.T, c *client.Client, thread, title, demoOpts string) tether.Run {
	t.Helper()
	ctx := testCtx(t)
	var meta any
	if title != "" {
		meta = map[string]string{"title": title}
	}
	if _, err := c.CreateThread(ctx, thread, meta); err != nil {
		t.Fatal(err)
	}
	run, err := c.CreateRun(ctx, thread, client.RunRequest{Agent: demo.Name,
		Input:    tether.RunInput{Messages: []tether.InputMessage{{Role: tether.RoleUser, Content: "hi"}}},
		Metadata: json.RawMessage(`{"demo":` + demoOpts + `}`)})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func waitStatus(t *testing.T, c *client.Client, runID string, want tether.RunStatus) tether.Run {
	t.Helper()
	var r tether.Run
	testutil.Eventually(t, 10*time.Second, "run "+string(want), func() bool {
		snap, err := c.Run(testCtx(t), runID)
		if err != nil {
			t.Fatal(err)
		}
		r = snap.Runs[0]
		return r.Status == want
	})
	return r
}

func TestVersionFlags(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-v"}, {"version"}} {
		out, _, err := cli(t, "", args...)
		if err != nil || out != "tether "+versionString()+"\n" {
			t.Errorf("%q: %q, %v", args, out, err)
		}
	}
}

// Every command prints its help for -h, and nothing else: tether version
// -h printed the version, the others would have run.
func TestHelpOnEveryCommand(t *testing.T) {
	for _, c := range commands() {
		for _, h := range []string{"-h", "--help"} {
			out, errOut, err := cli(t, "http://127.0.0.1:1", c.name, h)
			if err != nil || out != "" || !strings.Contains(errOut, "Usage: tether "+c.name) {
				t.Errorf("tether %s %s: err %v, stdout %q, stderr %q", c.name, h, err, out, errOut)
			}
		}
	}
}

func TestThreadsCommand(t *testing.T) {
	url, c := realServer(t)
	if _, errOut, err := cli(t, url, "threads"); err != nil || !strings.Contains(errOut, "No threads") {
		t.Fatalf("empty: %q, %v", errOut, err)
	}
	done := startDemo(t, c, "first", "What is a durable stream?", `{"tokens":3,"delay_ms":0}`)
	waitStatus(t, c, done.ID, tether.RunDone)
	busy := startDemo(t, c, "second", "", `{"tokens":100000,"delay_ms":1000}`)
	waitStatus(t, c, busy.ID, tether.RunRunning)

	out, _, err := cli(t, url, "threads")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "THREAD") {
		t.Fatalf("table:\n%s", out)
	}
	if f := strings.Fields(lines[1]); f[0] != "second" || f[1] != "busy" || !strings.Contains(lines[1], busy.ID) {
		t.Errorf("busy row: %q", lines[1])
	}
	if f := strings.Fields(lines[2]); f[0] != "first" || f[1] != "idle" || !strings.HasSuffix(lines[2], "What is a durable stream?") {
		t.Errorf("idle row: %q", lines[2])
	}
	out, _, err = cli(t, url, "threads", "--status", "idle", "--json")
	var th tether.Thread
	if err != nil || strings.Count(out, "\n") != 1 || json.Unmarshal([]byte(out), &th) != nil || th.ID != "first" {
		t.Errorf("--status idle --json: %q, %v", out, err)
	}
	if _, _, err := cli(t, url, "threads", "--status", "nonsense"); err == nil || !strings.Contains(err.Error(), "bad_request") {
		t.Errorf("bad status: %v", err)
	}
}

func TestCancelCommand(t *testing.T) {
	url, c := realServer(t)
	r := startDemo(t, c, "t1", "", `{"tokens":100000,"delay_ms":50}`)
	waitStatus(t, c, r.ID, tether.RunRunning)
	out, _, err := cli(t, url, "cancel", r.ID)
	if err != nil || !strings.Contains(out, "cancel requested") {
		t.Fatalf("cancel: %q, %v", out, err)
	}
	waitStatus(t, c, r.ID, tether.RunCancelled)
	out, _, err = cli(t, url, "cancel", r.ID)
	if err != nil || out != "run "+r.ID+" had already ended cancelled\n" {
		t.Errorf("cancel again: %q, %v", out, err)
	}
	if _, _, err := cli(t, url, "cancel", "run_nope"); err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Errorf("unknown run: %v", err)
	}
	if _, _, err := cli(t, url, "cancel"); err != errUsage {
		t.Errorf("no run: %v", err)
	}
}

func TestAnswerCommand(t *testing.T) {
	url, c := realServer(t)
	r := startDemo(t, c, "t1", "", `{"tokens":5,"delay_ms":0,"ask":true}`)
	waiting := waitStatus(t, c, r.ID, tether.RunWaiting)
	out, errOut, err := cli(t, url, "answer", r.ID, "a", "dry", "tone")
	if err != nil || out != "answered request "+waiting.Request.ID+" of run "+r.ID+"\n" || !strings.Contains(errOut, "Which detail") {
		t.Fatalf("answer: %q %q %v", out, errOut, err)
	}
	waitStatus(t, c, r.ID, tether.RunDone)
	fa, err := c.FinalAnswer(testCtx(t), "t1")
	if err != nil || !strings.Contains(fa.Content, "“a dry tone”") {
		t.Errorf("final answer %q, %v", fa.Content, err)
	}
	if _, _, err := cli(t, url, "answer", r.ID, "again"); err == nil || !strings.Contains(err.Error(), "is done, not waiting for input") {
		t.Errorf("answer a finished run: %v", err)
	}
	if _, _, err := cli(t, url, "answer", "--json", r.ID, "{nope"); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Errorf("bad --json: %v", err)
	}
}

// A client command run before the server (the README's second terminal
// opened first) says that the server cannot be reached and what to check,
// as tether bench does; it printed the Go error of the request, "create
// thread: Post …: dial tcp …: connect: connection refused".
func TestClientCommandsServerDown(t *testing.T) {
	down := httptest.NewServer(nil)
	downURL := down.URL
	down.Close()
	for _, args := range [][]string{
		{"run", "hello"},
		{"threads"},
		{"cancel", "run_1"},
		{"answer", "run_1", "tone"},
	} {
		var stderr bytes.Buffer
		err := run(context.Background(), append(args[:1:1], append([]string{"--server", downURL}, args[1:]...)...), noEnv, io.Discard, &stderr)
		if err == nil {
			t.Fatalf("%v: no error", args)
		}
		want := "cannot reach the server at " + downURL + ": connection refused (is tether serve running?"
		if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "dial tcp") {
			t.Errorf("%v: %v, want %q", args, err, want)
		}
	}
}
