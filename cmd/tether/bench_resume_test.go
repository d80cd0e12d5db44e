package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestBenchResume runs the resume scenario briefly, with this test binary
// as its server, and checks that it measured every request on every
// thread, and that a second run over the same data directory skips the
// fill. It asserts no speed.
func TestBenchResume(t *testing.T) {
	saved := serveCommand
	t.Cleanup(func() { serveCommand = saved })
	serveCommand = func(args ...string) (*exec.Cmd, error) {
		cmd := exec.Command(os.Args[0], append([]string{"serve"}, args...)...)
		cmd.Env = append(os.Environ(), childEnv+"=1")
		return cmd, nil
	}
	dir := t.TempDir()
	for try := range 2 {
		var stdout, stderr bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := run(ctx, []string{"bench", "--scenario", "resume", "--history", "40,1500", "--rounds", "1",
			"--resume-data", dir, "--json"}, func(string) string { return "" }, &stdout, &stderr)
		cancel()
		if err != nil {
			t.Fatalf("bench: %v\n%s", err, stderr.String())
		}
		var out struct {
			Results []resumeResult `json:"results"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || len(out.Results) != 1 {
			t.Fatalf("summary: %v\n%s", err, stdout.String())
		}
		r := out.Results[0]
		if len(r.Threads) != 2 || r.Threads[0].Events < 40 || r.Threads[1].Events < 1500 || r.Threads[1].CheckpointBytes == 0 {
			t.Fatalf("threads %+v", r.Threads)
		}
		for _, h := range r.Threads {
			for _, k := range resumeKinds {
				tm := h.Kinds[k]
				if tm == nil || tm.ColdFirstByte.Median <= 0 || tm.ColdFirstEvent.Median < tm.ColdFirstByte.Median || tm.WarmFirstEvent.Median <= 0 {
					t.Errorf("%d events, %s: %+v", h.Events, k, tm)
				}
			}
		}
		if filled := bytes.Contains(stderr.Bytes(), []byte("filling")); filled != (try == 0) {
			t.Errorf("run %d filled: %v\n%s", try, filled, stderr.String())
		}
	}
}
