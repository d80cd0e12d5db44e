package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestTetherRunSurvivesRestart follows an external worker's run with
// `tether tail --format json THREAD` while the server is killed with
// SIGKILL and restarted in the middle of the run. The worker keeps its
// lease across the restart, retrying its appends while the server is down
// (as an idempotent producer: Producer-Id/Epoch/Seq), and finishes the run;
// tail must print the snapshot, then every event of the log exactly once,
// in order; and retries of appends committed before the kill are
// duplicates. Then `tether run` on a demo run (no
// restart) must print exactly the final answer.
func TestTetherRunSurvivesRestart(t *testing.T) {
	s := start(t, "")
	t.Run("tail across a restart", func(t *testing.T) { testTailAcrossRestart(t, s) })
	t.Run("run prints the answer", func(t *testing.T) { testRunPrintsAnswer(t, s) })
}

func testTailAcrossRestart(t *testing.T, s *server) {
	s.mustCall(http.MethodPost, "/v1/workers/claim",
		map[string]any{"worker_id": "e2e-worker", "agents": []string{workerAgent}, "wait_ms": 0}, http.StatusNoContent, nil)
	tid := s.createThread(t)

	tail := exec.Command(bin, "tail", "--server", s.URL, "--format", "json", tid)
	tail.Env = cleanEnv()
	setDeathSignal(tail)
	var tailErr syncBuffer
	tail.Stderr = &tailErr
	stdout, err := tail.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		lines []string
	)
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
		}
	}()
	tailLines := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), lines...)
	}
	stopTail := func() {
		if tail.ProcessState == nil {
			_ = tail.Process.Signal(syscall.SIGINT)
			done := make(chan struct{})
			go func() { <-read; tail.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				tail.Process.Kill()
				<-done
				t.Errorf("tether tail did not stop within 10s of SIGINT")
			}
		}
	}
	defer func() {
		stopTail()
		if t.Failed() {
			t.Logf("tether tail stderr:\n%s", tailErr.String())
		}
	}()
	// The thread is empty: tail's snapshot comes first, at -1, and then
	// every event of the run follows.
	eventually(t, 30*time.Second, "tail's snapshot", func() bool { return len(tailLines()) > 0 })

	run := s.createRun(t, tid, workerAgent, "external", "")
	var c struct {
		Lease struct {
			Token string `json:"token"`
		} `json:"lease"`
	}
	s.mustCall(http.MethodPost, "/v1/workers/claim",
		map[string]any{"worker_id": "e2e-worker", "agents": []string{workerAgent}, "wait_ms": 10000}, http.StatusOK, &c)
	l := lease{RunID: run.ID, Token: c.Lease.Token}

	// The worker: 60 complete messages and run.finished, each retried
	// until it lands. An append cut by the kill may or may not have been
	// committed; its retry, with the same Producer-Seq, must then be a
	// duplicate (204), not a second copy.
	const batches = 60
	batch := func(i int) []map[string]any {
		if i == batches {
			return []map[string]any{{"type": "run.finished", "status": "done"}}
		}
		return message(fmt.Sprintf("m%02d", i), "part ", fmt.Sprint(i))
	}
	var acked, duplicates atomic.Int64
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	workerErr := make(chan error, 1)
	go func() {
		for i := 0; i <= batches; i++ {
			status, err := s.appendRetrying(ctx, l, i, batch(i))
			if err != nil {
				workerErr <- fmt.Errorf("batch %d: %w", i, err)
				return
			}
			if status == http.StatusNoContent {
				duplicates.Add(1)
			}
			acked.Add(1)
			time.Sleep(10 * time.Millisecond)
		}
		workerErr <- nil
	}()

	eventually(t, 60*time.Second, "20 batches", func() bool { return acked.Load() >= 20 })
	s.kill9()
	before := acked.Load()
	s.restart()
	if err := <-workerErr; err != nil {
		t.Fatalf("worker: %v", err)
	}
	t.Logf("killed after %d batches of %d; %d retries were duplicates", before, batches, duplicates.Load())
	if r := s.waitRunEnded(t, run.ID); r.Status != "done" {
		t.Fatalf("run ended %s, want done", r.Status)
	}
	log := s.readLog(t, "/v1/threads/"+tid+"/events")
	// Retries of appends from before the restart, and of the last one, are
	// duplicates: the producer's state survived with the events.
	for _, seq := range []int{0, int(before) - 1, batches} {
		res := s.appendEvents(t.Context(), l, batch(seq), "Producer-Id", "e2e-worker", "Producer-Epoch", "0", "Producer-Seq", fmt.Sprint(seq))
		if res.Err != nil || res.Status != http.StatusNoContent {
			t.Errorf("the retry of append %d after the restart: %d %v %s, want 204", seq, res.Status, res.Err, res.Body)
		}
	}
	if again := s.readLog(t, "/v1/threads/"+tid+"/events"); len(again) != len(log) {
		t.Errorf("the log grew from %d to %d events on duplicate appends", len(log), len(again))
	}
	eventually(t, 60*time.Second, "tail to print the run's end", func() bool {
		ls := tailLines()
		return len(ls) > 0 && strings.Contains(ls[len(ls)-1], `"run.finished"`) || len(ls) > len(log)+1
	})
	stopTail()
	if code := tail.ProcessState.ExitCode(); code != 0 {
		t.Errorf("tether tail exited %d after SIGINT, want 0", code)
	}

	ls := tailLines()
	var first struct {
		Snapshot *struct {
			Offset string `json:"offset"`
		} `json:"snapshot"`
	}
	if err := json.Unmarshal([]byte(ls[0]), &first); err != nil || first.Snapshot == nil || first.Snapshot.Offset != "-1" {
		t.Fatalf("tail's first line is %.300s, want a snapshot at offset -1", ls[0])
	}
	ls = ls[1:]
	for i := 0; i < max(len(ls), len(log)); i++ {
		if i >= len(ls) || i >= len(log) {
			t.Fatalf("tail printed %d events, the log has %d", len(ls), len(log))
		}
		var e logEvent
		if err := json.Unmarshal([]byte(ls[i]), &e); err != nil {
			t.Fatalf("tail line %d: %v: %.300s", i+1, err, ls[i])
		}
		if e.Offset != log[i].Offset || e.Type != log[i].Type {
			t.Fatalf("tail line %d is %s %s, the log's event #%d is %s %s", i+1, e.Offset, e.Type, i, log[i].Offset, log[i].Type)
		}
		sameJSON(t, fmt.Sprintf("tail line %d", i+1), []byte(ls[i]), json.RawMessage(log[i].Raw))
	}
}

// appendRetrying appends a batch as producer e2e-worker (epoch 0) with
// sequence number seq until the server answers: transport errors and 5xx
// are retried with backoff (the server may be down). It returns the
// status: 200, or 204 when a try that was cut off had landed.
func (s *server) appendRetrying(ctx context.Context, l lease, seq int, batch []map[string]any) (int, error) {
	backoff := 20 * time.Millisecond
	for {
		res := s.appendEvents(ctx, l, batch, "Producer-Id", "e2e-worker", "Producer-Epoch", "0", "Producer-Seq", fmt.Sprint(seq))
		switch {
		case res.Err == nil && (res.Status == http.StatusOK || res.Status == http.StatusNoContent):
			return res.Status, nil
		case res.Err == nil && res.Status < 500:
			return 0, fmt.Errorf("status %d: %s", res.Status, res.Body)
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("%w (last answer: %d %v)", ctx.Err(), res.Status, res.Err)
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

func testRunPrintsAnswer(t *testing.T, s *server) {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--server", s.URL, "--metadata", `{"demo":{"tokens":300,"delay_ms":5}}`, "What does tether run print?")
	cmd.Env = cleanEnv()
	setDeathSignal(cmd)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tether run: %v\nstderr:\n%s", err, stderr.String())
	}
	m := regexp.MustCompile(`run (\S+) on thread (\S+)`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("tether run did not name its run and thread on stderr:\n%s", stderr.String())
	}
	answer := s.finalAnswer(t, m[2])
	if !answer.Complete || answer.RunID != m[1] {
		t.Fatalf("final answer %+v, want the complete answer of run %s", answer, m[1])
	}
	if got := stdout.String(); got != answer.Content+"\n" {
		t.Errorf("tether run printed\n  %q\nthe final answer is\n  %q", got, answer.Content)
	}
}

// TestBadTokenAndLoopbackGuard: without API keys the server refuses a
// non-loopback address; a token shorter than 16 characters is refused; with
// a good token it serves on every interface and answers 401 to requests
// without it, or with another.
func TestBadTokenAndLoopbackGuard(t *testing.T) {
	port := func() string {
		_, p, _ := net.SplitHostPort(freeAddr(t))
		return p
	}
	refuse := func(want string, args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "--data", t.TempDir()}, args...)...)
		cmd.Env = cleanEnv()
		setDeathSignal(cmd)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		switch {
		case ctx.Err() != nil:
			t.Fatalf("tether %s: still running after 15s, want a refusal:\n%s", strings.Join(args, " "), out)
		case !errors.As(err, &ee) || ee.ExitCode() == 0:
			t.Fatalf("tether %s: %v, want a non-zero exit:\n%s", strings.Join(args, " "), err, out)
		case !strings.Contains(string(out), want):
			t.Errorf("tether %s said:\n%s\nwant a message with %q", strings.Join(args, " "), out, want)
		}
	}
	refuse("refusing to listen on ", "--addr", "0.0.0.0:"+port())
	refuse("--token", "--addr", "0.0.0.0:"+port())
	refuse("--token ($TETHER_TOKEN) must be at least 16 characters", "--addr", "127.0.0.1:"+port(), "--token", "short")

	const token = "e2e-token-0123456789abcdef"
	s := startOn(t, "0.0.0.0:"+port(), "", "--token", token)
	for _, c := range []struct {
		auth string
		want int
	}{
		{"", http.StatusUnauthorized},
		{"Bearer not-the-token-0123456789", http.StatusUnauthorized},
		{"Basic " + token, http.StatusUnauthorized},
		{"Bearer " + token, http.StatusOK},
	} {
		var hdr []string
		if c.auth != "" {
			hdr = []string{"Authorization", c.auth}
		}
		status, b, err := s.call(t.Context(), http.MethodGet, "/v1/threads", nil, hdr...)
		if err != nil {
			t.Fatal(err)
		}
		if status != c.want {
			t.Errorf("GET /v1/threads with Authorization %q: %d %s, want %d", c.auth, status, b, c.want)
			continue
		}
		if status == http.StatusUnauthorized {
			var e struct {
				Error struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			if json.Unmarshal(b, &e); e.Error.Code != "unauthorized" {
				t.Errorf("401 with body %s, want code unauthorized", b)
			}
		}
	}
	// Writes need the token too.
	status, _, err := s.call(t.Context(), http.MethodPost, "/v1/threads", map[string]any{})
	if err != nil || status != http.StatusUnauthorized {
		t.Errorf("POST /v1/threads without the token: %d %v, want 401", status, err)
	}
	s.mustCall(http.MethodPost, "/v1/threads", map[string]any{}, http.StatusCreated, nil, "Authorization", "Bearer "+token)
}
