package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/client"
)

// exampleFiller is what both example workers (examples/worker-go and
// examples/worker-python) stream after "You said: <prompt>. ". The tests
// check that both sources still hold it.
const exampleFiller = "This answer comes from an external worker. It claimed the run over HTTP, holds a lease that it renews with every append and with heartbeats, and streams each word as its own event. Every event is committed to the thread's durable log before any client sees it, so a client that drops, refreshes or comes late resumes from its last offset and misses nothing. If the server restarts in the middle, the worker retries its appends with the same producer sequence number until the server is back, and each event lands exactly once."

// TestGoWorkerSurvivesServerKill runs examples/worker-go as a process and
// kills the server with SIGKILL in the middle of the worker's run, while
// raw SSE clients and a client.Subscribe follow it. The server comes back
// on the same port and data within the lease TTL; the worker, which kept
// retrying its appends, finishes the run done; every client ends with
// exactly the server's log; and the log holds each of the worker's events
// once.
func TestGoWorkerSurvivesServerKill(t *testing.T) {
	checkExampleSource(t, "../examples/worker-go/main.go")
	s := start(t, "")
	w := startWorker(t, "go worker", buildGoWorker(t), "--server", s.URL, "--delay", "60ms", "--id", "e2e-go-worker")
	tid := s.createThread(t)
	const prompt = "Tell me about durable streams"
	rid := s.workerRun(t, tid, "echo", prompt).ID
	testKillMidRun(t, s, w, tid, rid, prompt, true)
}

// TestPythonWorker runs examples/worker-python/stdlib_worker.py (the
// porting reference, standard library only) as a process: a run
// completes with the expected answer; a run that asks for input gets it;
// and a run survives a kill -9 of the server, like with the Go worker.
func TestPythonWorker(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the Python worker example is not tested")
	}
	checkExampleSource(t, "../examples/worker-python/stdlib_worker.py")
	s := start(t, "")
	w := startWorker(t, "python worker", py, "../examples/worker-python/stdlib_worker.py", "--server", s.URL, "--delay", "0.04", "--id", "e2e-py-worker")
	tid := s.createThread(t)

	const prompt = "Hello from the test"
	rid := s.workerRun(t, tid, "pyecho", prompt).ID
	if run := s.waitRunEnded(t, rid); run.Status != tether.RunDone {
		t.Fatalf("run ended %s %+v", run.Status, run.Error)
	}
	if fa := s.finalAnswer(t, tid); fa.Content != answerOf(prompt) || !fa.Complete {
		t.Fatalf("final answer %+v, want %q", fa, answerOf(prompt))
	}
	checkWorkerLog(t, s.readLog(t, "/v1/runs/"+rid+"/events"), prompt)

	rid = s.workerRun(t, tid, "pyecho", "Please ask me first").ID
	var run tether.Run
	eventually(t, 30*time.Second, "the run to wait for input", func() bool {
		run, _ = s.getRun(t, rid)
		return run.Status == tether.RunWaiting || run.Status.Terminal()
	})
	if run.Request == nil {
		t.Fatalf("run %s has no request", run.Status)
	}
	s.mustCall(http.MethodPost, "/v1/runs/"+rid+"/input", map[string]any{"request_id": run.Request.ID, "value": "cheerful"}, http.StatusAccepted, nil)
	if run := s.waitRunEnded(t, rid); run.Status != tether.RunDone {
		t.Fatalf("run ended %s %+v", run.Status, run.Error)
	}
	want := "You said: Please ask me first. You asked for a cheerful tone. " + exampleFiller
	if fa := s.finalAnswer(t, tid); fa.Content != want {
		t.Fatalf("final answer %q, want %q", fa.Content, want)
	}

	const crashPrompt = "Survive a crash"
	rid = s.workerRun(t, tid, "pyecho", crashPrompt).ID
	testKillMidRun(t, s, w, tid, rid, crashPrompt, false)
}

// testKillMidRun follows the worker's run rid with several clients, kills
// the server once they saw part of it, waits until the worker failed to
// reach it, restarts it, and checks the end. thread tells whether the
// run is the only one of its thread (then thread followers are added).
func testKillMidRun(t *testing.T, s *server, w *workerProc, tid, rid, prompt string, thread bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	paths := []string{"/v1/runs/" + rid + "/events", "/v1/runs/" + rid + "/events", "/v1/runs/" + rid + "/events"}
	if thread {
		paths = append(paths, "/v1/threads/"+tid+"/events", "/v1/threads/"+tid+"/events")
	}
	var fs []*follower
	for i, p := range paths {
		fs = append(fs, s.follow(ctx, fmt.Sprintf("client %d (%s)", i, p), p, followOptions{After: "-1", Resume: true, UntilRunFinished: true}))
	}
	sub := subscribeAll(ctx, s, rid)

	eventually(t, 60*time.Second, "every client to see 25 events", func() bool {
		for _, f := range fs {
			if f.count() < 25 {
				return false
			}
		}
		return true
	})
	retried := w.retries(rid)
	s.kill9()
	for _, f := range fs {
		if err := f.wait(); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		for _, e := range f.seen() {
			if e.Type == "run.finished" {
				t.Fatalf("%s saw the run finish before the kill: the run is too short for this test", f.name)
			}
		}
	}
	// The worker must meet the dead server before it comes back, not only
	// lose the request in flight: both workers log a line with the run's
	// id for each retry of its requests.
	eventually(t, 30*time.Second, "the worker to retry a request of the run twice", func() bool { return w.retries(rid) >= retried+2 })
	s.restart()

	if run := s.waitRunEnded(t, rid); run.Status != tether.RunDone {
		t.Fatalf("run ended %s %+v, want done", run.Status, run.Error)
	}
	runLog := s.readLog(t, "/v1/runs/"+rid+"/events")
	checkWorkerLog(t, runLog, prompt)
	if first, last := runLog[0].Offset, runLog[len(runLog)-1].Offset; first[:10] == last[:10] {
		t.Errorf("the run's first and last events (%s, %s) have the same epoch: the worker appended nothing after the restart", first, last)
	}
	if fa := s.finalAnswer(t, tid); fa.Content != answerOf(prompt) {
		t.Errorf("final answer %q, want %q", fa.Content, answerOf(prompt))
	}

	var wg sync.WaitGroup
	for i, f := range fs {
		want := runLog
		if strings.HasPrefix(paths[i], "/v1/threads/") {
			want = s.readLog(t, paths[i])
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := s.follow(ctx, f.name+" resumed", paths[i], followOptions{Resume: true, UntilRunFinished: true, Prior: f.seen()})
			if err := r.wait(); err != nil {
				t.Errorf("%s: %v", r.name, err)
				return
			}
			sameSequence(t, r.name, r.seen(), want)
		}()
	}
	wg.Wait()

	got, err := sub.wait()
	if err != nil {
		t.Fatalf("client.Subscribe: %v", err)
	}
	for i := 0; i < max(len(got), len(runLog)); i++ {
		if i >= len(got) || i >= len(runLog) || got[i].Offset != tether.Offset(runLog[i].Offset) || got[i].Type != runLog[i].Type {
			t.Fatalf("client.Subscribe got %d events, the log has %d; they differ at #%d", len(got), len(runLog), i)
		}
	}
}

// answerOf is the text the example workers answer prompt with.
func answerOf(prompt string) string { return "You said: " + prompt + ". " + exampleFiller }

// checkWorkerLog checks a run of an example worker: one of each event it
// sends once, its text whole, each word in one text.delta, and the run done.
func checkWorkerLog(t *testing.T, log []logEvent, prompt string) {
	t.Helper()
	n := map[string]int{}
	var text strings.Builder
	for i, e := range log {
		n[e.Type]++
		if e.Type == "text.delta" {
			text.WriteString(e.Delta)
		}
		if i > 0 && e.Offset <= log[i-1].Offset {
			t.Errorf("event #%d at %s is not after %s", i, e.Offset, log[i-1].Offset)
		}
	}
	for _, typ := range []string{"run.created", "run.started", "message.started", "reasoning.delta", "tool.started", "tool.delta", "tool.finished", "message.finished", "run.finished"} {
		if n[typ] != 1 {
			t.Errorf("the run's log has %d %s events, want 1", n[typ], typ)
		}
	}
	want := answerOf(prompt)
	if text.String() != want {
		t.Errorf("the text deltas make\n  %q\nwant\n  %q", text.String(), want)
	}
	if words := len(strings.Split(want, " ")); n["text.delta"] != words {
		t.Errorf("%d text.delta events for %d words", n["text.delta"], words)
	}
	if last := log[len(log)-1]; last.Type != "run.finished" || last.Status != "done" {
		t.Errorf("the last event is %s", last.Raw)
	}
}

// checkExampleSource fails the test if an example no longer streams
// exampleFiller.
func checkExampleSource(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), exampleFiller) {
		t.Fatalf("%s does not hold the answer text of exampleFiller; update one or the other", path)
	}
}

// workerRun creates a run of a remote agent. The server knows the agent
// only once the worker's first claim came, so "unknown agent" is retried.
func (s *server) workerRun(t testing.TB, tid, agent, prompt string) tether.Run {
	t.Helper()
	body := map[string]any{
		"agent": agent,
		"input": map[string]any{"messages": []map[string]string{{"role": "user", "content": prompt}}},
	}
	var run tether.Run
	eventually(t, 60*time.Second, "the server to accept runs of agent "+agent, func() bool {
		status, b, err := s.call(context.Background(), http.MethodPost, "/v1/threads/"+tid+"/runs", body)
		switch {
		case err != nil:
			t.Fatalf("create run: %v", err)
		case status == http.StatusBadRequest && strings.Contains(string(b), "unknown agent"):
			return false
		case status != http.StatusCreated:
			t.Fatalf("create run: status %d: %s", status, b)
		}
		if err := json.Unmarshal(b, &run); err != nil {
			t.Fatalf("create run: %v: %s", err, b)
		}
		return true
	})
	return run
}

// buildGoWorker builds examples/worker-go (with -race if E2E_RACE=1).
func buildGoWorker(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "worker-go")
	args := []string{"build", "-o", out}
	if os.Getenv("E2E_RACE") == "1" {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "github.com/tetherhq/tether/examples/worker-go")...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build examples/worker-go: %v\n%s", err, b)
	}
	return out
}

// workerProc is an example worker running as a process.
type workerProc struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

// startWorker starts argv as a worker process. It is stopped (SIGTERM,
// then SIGKILL) when the test ends, before the server; its output is
// logged if the test failed.
func startWorker(t *testing.T, name string, argv ...string) *workerProc {
	t.Helper()
	w := &workerProc{name: name, cmd: exec.Command(argv[0], argv[1:]...), out: &syncBuffer{}, done: make(chan struct{})}
	w.cmd.Env = cleanEnv()
	w.cmd.Stdout, w.cmd.Stderr = w.out, w.out
	setDeathSignal(w.cmd)
	if err := w.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = w.cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-w.done:
		case <-time.After(15 * time.Second):
			t.Errorf("%s did not stop within 15s of SIGTERM", name)
			_ = w.cmd.Process.Kill()
			<-w.done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, w.out.String())
		}
	})
	return w
}

// retries counts the lines of the worker's output about retrying a
// request of run rid.
func (w *workerProc) retries(rid string) int {
	n := 0
	for _, line := range strings.Split(w.out.String(), "\n") {
		if strings.Contains(line, rid) && strings.Contains(line, "retrying") {
			n++
		}
	}
	return n
}

// goSubscription is a client.Subscribe that collects a run's events.
type goSubscription struct {
	done   chan struct{}
	events []*tether.Event
	err    error
}

// subscribeAll follows a run with the Go client, which resumes by itself
// across the server's restart, until the run ends.
func subscribeAll(ctx context.Context, s *server, rid string) *goSubscription {
	sub := &goSubscription{done: make(chan struct{})}
	tr := &http.Transport{}
	c := client.New(s.URL, &client.Options{HTTPClient: &http.Client{Transport: tr}, MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second})
	go func() {
		defer close(sub.done)
		defer tr.CloseIdleConnections()
		for u, err := range c.Subscribe(ctx, client.SubscribeRequest{RunID: rid, After: tether.OffsetStart}) {
			if err != nil {
				sub.err = err
				return
			}
			if u.Event == nil {
				sub.err = errors.New("a snapshot on a run subscription from -1")
				return
			}
			sub.events = append(sub.events, u.Event)
		}
	}()
	return sub
}

func (sub *goSubscription) wait() ([]*tether.Event, error) {
	<-sub.done
	return sub.events, sub.err
}
