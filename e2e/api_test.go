package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
)

// createThread creates a thread and returns its id.
func (s *server) createThread(t testing.TB) string {
	t.Helper()
	var th tether.Thread
	s.mustCall(http.MethodPost, "/v1/threads", map[string]any{}, http.StatusCreated, &th)
	return th.ID
}

// createRun creates a run of agent on thread tid with one user message and
// the given metadata (a JSON object, or "").
func (s *server) createRun(t testing.TB, tid, agent, prompt, metadata string) tether.Run {
	t.Helper()
	body := map[string]any{
		"agent": agent,
		"input": map[string]any{"messages": []map[string]string{{"role": "user", "content": prompt}}},
	}
	if metadata != "" {
		body["metadata"] = json.RawMessage(metadata)
	}
	var r tether.Run
	s.mustCall(http.MethodPost, "/v1/threads/"+tid+"/runs", body, http.StatusCreated, &r)
	return r
}

// demoRun creates a thread and a demo run on it.
func (s *server) demoRun(t testing.TB, prompt, metadata string) (tid, rid string) {
	t.Helper()
	tid = s.createThread(t)
	return tid, s.createRun(t, tid, "demo", prompt, metadata).ID
}

// getRun returns a run and its messages.
func (s *server) getRun(t testing.TB, rid string) (tether.Run, []tether.Message) {
	t.Helper()
	var body struct {
		Run      tether.Run       `json:"run"`
		Messages []tether.Message `json:"messages"`
	}
	s.mustCall(http.MethodGet, "/v1/runs/"+rid, nil, http.StatusOK, &body)
	return body.Run, body.Messages
}

// finalAnswer returns GET /v1/threads/{tid}/final-answer.
func (s *server) finalAnswer(t testing.TB, tid string) tether.FinalAnswer {
	t.Helper()
	var fa tether.FinalAnswer
	s.mustCall(http.MethodGet, "/v1/threads/"+tid+"/final-answer", nil, http.StatusOK, &fa)
	return fa
}

// threadRow returns the thread's row from GET /v1/threads.
func (s *server) threadRow(t testing.TB, tid string) tether.Thread {
	t.Helper()
	var page struct {
		Threads []tether.Thread `json:"threads"`
	}
	s.mustCall(http.MethodGet, "/v1/threads?limit=1000", nil, http.StatusOK, &page)
	for _, th := range page.Threads {
		if th.ID == tid {
			return th
		}
	}
	t.Fatalf("thread %s is not in GET /v1/threads", tid)
	return tether.Thread{}
}

// waitRunEnded polls until the run is terminal and returns it.
func (s *server) waitRunEnded(t testing.TB, rid string) tether.Run {
	t.Helper()
	var r tether.Run
	eventually(t, 90*time.Second, "run "+rid+" to end", func() bool {
		r, _ = s.getRun(t, rid)
		return r.Status.Terminal()
	})
	return r
}

// workerAgent is the agent name the external workers of these tests serve.
const workerAgent = "bench-agent"

// lease is what a worker holds on a claimed run.
type lease struct {
	RunID string
	Token string
}

// externalRun creates a thread and a run of workerAgent and claims it as
// an external worker over HTTP. The server accepts an agent it does not
// run itself only once some worker claimed for it, hence the first claim.
func (s *server) externalRun(t testing.TB, prompt string) (tid string, l lease) {
	t.Helper()
	s.mustCall(http.MethodPost, "/v1/workers/claim",
		map[string]any{"worker_id": "e2e-worker", "agents": []string{workerAgent}, "wait_ms": 0}, http.StatusNoContent, nil)
	tid = s.createThread(t)
	r := s.createRun(t, tid, workerAgent, prompt, "")
	var c struct {
		Run   tether.Run `json:"run"`
		Lease struct {
			Token string `json:"token"`
		} `json:"lease"`
	}
	s.mustCall(http.MethodPost, "/v1/workers/claim",
		map[string]any{"worker_id": "e2e-worker", "agents": []string{workerAgent}, "wait_ms": 10000}, http.StatusOK, &c)
	if c.Run.ID != r.ID || c.Lease.Token == "" {
		t.Fatalf("claimed run %s with token %q, want run %s", c.Run.ID, c.Lease.Token, r.ID)
	}
	return tid, lease{RunID: r.ID, Token: c.Lease.Token}
}

// appendResult is the outcome of one append.
type appendResult struct {
	Status int    // 0 if the server could not be reached or did not answer
	Next   string // next_offset, on a 200
	Body   []byte
	Err    error
}

// appendEvents posts a batch of events under a lease.
func (s *server) appendEvents(ctx context.Context, l lease, evs []map[string]any, header ...string) appendResult {
	status, b, err := s.call(ctx, http.MethodPost, "/v1/runs/"+l.RunID+"/events", evs, append([]string{"Tether-Lease", l.Token}, header...)...)
	if err != nil {
		return appendResult{Err: err}
	}
	res := appendResult{Status: status, Body: b}
	if status == http.StatusOK {
		var body struct {
			Next string `json:"next_offset"`
		}
		if err := json.Unmarshal(b, &body); err != nil {
			res.Err = fmt.Errorf("decode %s: %v", b, err)
		}
		res.Next = body.Next
	}
	return res
}

// message is a batch that is one complete assistant message: started,
// one text.delta per word, finished. Its events all carry id.
func message(id string, words ...string) []map[string]any {
	evs := []map[string]any{{"type": "message.started", "message_id": id, "role": "assistant"}}
	for _, w := range words {
		evs = append(evs, map[string]any{"type": "text.delta", "message_id": id, "delta": w})
	}
	return append(evs, map[string]any{"type": "message.finished", "message_id": id, "status": "done"})
}

// metric returns the value of an unlabelled metric from GET /metrics.
func (s *server) metric(t testing.TB, name string) float64 {
	t.Helper()
	status, b, err := s.call(context.Background(), http.MethodGet, "/metrics", nil)
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", status, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metric %s: %q", name, line)
			}
			return f
		}
	}
	t.Fatalf("no metric %s in GET /metrics", name)
	return 0
}
