package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"syscall"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
)

// threadStatus reads a thread's status with GET /v1/threads/{id}.
func (s *server) threadStatus(t testing.TB, tid string) tether.ThreadStatus {
	t.Helper()
	var snap tether.Snapshot
	s.mustCall(http.MethodGet, "/v1/threads/"+tid, nil, http.StatusOK, &snap)
	return snap.Thread.Status
}

// TestHumanInTheLoopAcrossRestart: an external worker's run waits for a
// person; the server is killed (-9) and restarted while it waits; the answer
// is posted to the new server; the worker, which kept its lease, goes on and
// finishes the run. The thread's status goes busy → waiting → busy → idle,
// in GET /v1/threads/{id} and in the events a client followed.
func TestHumanInTheLoopAcrossRestart(t *testing.T) {
	s := start(t, "")
	startWorker(t, "go worker", buildGoWorker(t), "--server", s.URL, "--delay", "40ms", "--id", "e2e-hitl-worker")
	tid := s.createThread(t)
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	f := s.follow(ctx, "thread follower", "/v1/threads/"+tid+"/events", followOptions{After: "-1", Resume: true, UntilRunFinished: true})

	rid := s.workerRun(t, tid, "echo", "Please ask me about the tone").ID
	seen := []tether.ThreadStatus{s.threadStatus(t, tid)}
	var run tether.Run
	eventually(t, 30*time.Second, "the run to wait for input", func() bool {
		run, _ = s.getRun(t, rid)
		return run.Status == tether.RunWaiting || run.Status.Terminal()
	})
	if run.Status != tether.RunWaiting || run.Request == nil {
		t.Fatalf("run is %s, want waiting with a request", run.Status)
	}
	seen = append(seen, s.threadStatus(t, tid))

	s.kill9()
	if err := f.wait(); err != nil { // it stops when the server is gone
		t.Fatal(err)
	}
	s.restart()
	// A client that comes back picks up where it was.
	f = s.follow(ctx, "thread follower, after the restart", "/v1/threads/"+tid+"/events", followOptions{Prior: f.seen(), Resume: true, UntilRunFinished: true})
	if st := s.threadStatus(t, tid); st != tether.ThreadWaiting {
		t.Fatalf("after the restart the thread is %s, want waiting", st)
	}
	if run, _ = s.getRun(t, rid); run.Status != tether.RunWaiting {
		t.Fatalf("after the restart the run is %s, want still waiting", run.Status)
	}
	s.mustCall(http.MethodPost, "/v1/runs/"+rid+"/input", map[string]any{"request_id": run.Request.ID, "value": "warm"}, http.StatusAccepted, nil)
	seen = append(seen, s.threadStatus(t, tid)) // the answer is in: busy again
	if run := s.waitRunEnded(t, rid); run.Status != tether.RunDone {
		t.Fatalf("run ended %s %+v", run.Status, run.Error)
	}
	seen = append(seen, s.threadStatus(t, tid))
	want := []tether.ThreadStatus{tether.ThreadBusy, tether.ThreadWaiting, tether.ThreadBusy, tether.ThreadIdle}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("thread statuses %v, want %v", seen, want)
		}
	}
	if fa := s.finalAnswer(t, tid); fa.Content != "You said: Please ask me about the tone. You asked for a warm tone. "+exampleFiller {
		t.Fatalf("final answer %q", fa.Content)
	}

	// The same sequence, as the follower saw it in the stream.
	if err := f.wait(); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range f.seen() {
		switch e.Type {
		case tether.EventRunStarted, tether.EventRunWaiting, tether.EventRunInput, tether.EventRunFinished:
			types = append(types, e.Type)
		}
	}
	wantTypes := []string{tether.EventRunStarted, tether.EventRunWaiting, tether.EventRunInput, tether.EventRunFinished}
	if len(types) != len(wantTypes) {
		t.Fatalf("the stream showed %v, want %v", types, wantTypes)
	}
	for i := range types {
		if types[i] != wantTypes[i] {
			t.Fatalf("the stream showed %v, want %v", types, wantTypes)
		}
	}
}

// TestWorkerKilledMidRun: the worker process dies (SIGKILL) in the middle
// of a run. Within the lease TTL and a sweep the server ends the run
// aborted (worker_lost), with its running message, in one event that the
// run's subscribers see.
func TestWorkerKilledMidRun(t *testing.T) {
	s := start(t, "", "--lease-ttl", "2s", "--sweep-interval", "200ms")
	w := startWorker(t, "go worker", buildGoWorker(t), "--server", s.URL, "--delay", "50ms", "--id", "e2e-doomed-worker")
	tid := s.createThread(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	rid := s.workerRun(t, tid, "echo", "A run that will lose its worker").ID
	f := s.follow(ctx, "run follower", "/v1/runs/"+rid+"/events", followOptions{After: "-1", Resume: true, UntilRunFinished: true})
	eventually(t, 30*time.Second, "the follower to see 10 events", func() bool { return f.count() >= 10 })

	killed := time.Now()
	if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := f.wait(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(killed)
	evs := f.seen()
	last := evs[len(evs)-1]
	var fin struct {
		Status string           `json:"status"`
		Error  tether.ErrorInfo `json:"error"`
	}
	if err := json.Unmarshal(last.Data, &fin); err != nil || last.Type != tether.EventRunFinished {
		t.Fatalf("the follower's last event is %s %s", last.Type, last.Data)
	}
	if fin.Status != "aborted" || fin.Error.Code != "worker_lost" {
		t.Fatalf("run.finished %s", last.Data)
	}
	t.Logf("the run ended aborted %v after the worker was killed (lease 2s, sweep 200ms)", took.Round(10*time.Millisecond))
	run, msgs := s.getRun(t, rid)
	if run.Status != tether.RunAborted {
		t.Fatalf("run is %s", run.Status)
	}
	for _, m := range msgs {
		if m.Role == tether.RoleAssistant && m.Status != tether.MessageAborted {
			t.Fatalf("message %s is %s, want aborted", m.ID, m.Status)
		}
	}
}
