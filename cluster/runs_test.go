package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
)

// lease is what an external worker holds on a run it claimed.
type lease struct {
	RunID string
	Token string
}

// claim long-polls a claim of agent through p and returns the lease.
func claim(t testing.TB, p *endpoint, worker, agent string, wait time.Duration) (tether.Run, lease) {
	t.Helper()
	var c struct {
		Run   tether.Run `json:"run"`
		Lease struct {
			Token string `json:"token"`
		} `json:"lease"`
	}
	p.mustCall(t, "POST", "/v1/workers/claim", map[string]any{"worker_id": worker, "agents": []string{agent}, "wait_ms": wait.Milliseconds()},
		http.StatusOK, &c)
	return c.Run, lease{RunID: c.Run.ID, Token: c.Lease.Token}
}

// knowAgent makes every node accept runs of an external agent: a worker
// asked each of them for it (see TestWorkerAgentOnEveryNode).
func knowAgent(t testing.TB, agent string, eps ...*endpoint) {
	t.Helper()
	for _, p := range eps {
		p.mustCall(t, "POST", "/v1/workers/claim", map[string]any{"worker_id": "probe", "agents": []string{agent}, "wait_ms": 0},
			http.StatusNoContent, nil)
	}
}

// produce posts a batch of events under a lease as producer "w", epoch 0,
// sequence seq.
func produce(ctx context.Context, p *endpoint, l lease, seq int, evs []map[string]any) (int, []byte, error) {
	status, body, _, err := p.call(ctx, "POST", "/v1/runs/"+l.RunID+"/events", evs,
		"Tether-Lease", l.Token, "Producer-Id", "w", "Producer-Epoch", "0", "Producer-Seq", strconv.Itoa(seq))
	return status, body, err
}

func delta(msg, text string) map[string]any {
	return map[string]any{"type": "text.delta", "message_id": msg, "delta": text}
}

// TestOneActiveRunAcrossNodes: creates of runs on one thread race on
// three nodes (multitask reject): exactly one is created, the others get
// run_active, and the log holds one run.created.
func TestOneActiveRunAcrossNodes(t *testing.T) {
	js := startJetStream(t)
	nodes := startNodes(t, js, 3, nodeOptions{})
	var eps []*endpoint
	for _, n := range nodes {
		eps = append(eps, &n.endpoint)
	}
	knowAgent(t, "echo", eps...)
	eps[0].createThread(t, "t1")
	for _, p := range eps { // every node has the thread in memory: each validates on its own state
		p.mustCall(t, "GET", "/v1/threads/t1", nil, http.StatusOK, nil)
	}
	const creates = 12
	var mu sync.Mutex
	codes := map[string]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range creates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			p := eps[i%len(eps)]
			status, body, _, err := p.call(context.Background(), "POST", "/v1/threads/t1/runs", map[string]any{"agent": "echo"})
			var e struct{ Error struct{ Code string } }
			json.Unmarshal(body, &e)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("%s: %v", p.name, err)
			case status == http.StatusCreated:
				codes["created"]++
			default:
				codes[fmt.Sprintf("%d %s", status, e.Error.Code)]++
			}
		}()
	}
	close(start)
	wg.Wait()
	if codes["created"] != 1 || codes["409 run_active"] != creates-1 {
		t.Fatalf("outcomes %v, want 1 created and %d run_active", codes, creates-1)
	}
	n := 0
	for _, e := range eps[1].readLog(t, "/v1/threads/t1/events") {
		if e.Type == "run.created" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d run.created in the log", n)
	}
}

// TestWorkerAcrossNodes: a run created through node 1 is claimed through
// node 2 (whose claim was already waiting); the worker's appends (with
// Producer headers) and heartbeats go to the three nodes in turn, and a
// retried append lands on another node than the first try. Every append
// is in the log once, in order, and every node gives the same final
// answer.
func TestWorkerAcrossNodes(t *testing.T) {
	js := startJetStream(t)
	nodes := startNodes(t, js, 3, nodeOptions{})
	var eps []*endpoint
	for _, n := range nodes {
		eps = append(eps, &n.endpoint)
	}
	knowAgent(t, "echo", eps...)
	eps[0].createThread(t, "t1")

	claimed := make(chan lease, 1)
	go func() {
		_, l := claim(t, eps[1], "w", "echo", 10*time.Second)
		claimed <- l
	}()
	time.Sleep(100 * time.Millisecond) // the claim waits on node 2
	var run tether.Run
	eps[0].mustCall(t, "POST", "/v1/threads/t1/runs", map[string]any{"agent": "echo",
		"input": map[string]any{"messages": []map[string]string{{"role": "user", "content": "count"}}}}, http.StatusCreated, &run)
	var l lease
	select {
	case l = <-claimed:
	case <-time.After(15 * time.Second):
		t.Fatal("the claim waiting on node 2 got no run")
	}
	if l.RunID != run.ID {
		t.Fatalf("claimed %s, want %s", l.RunID, run.ID)
	}

	ctx := t.Context()
	seq := 0
	mustProduce := func(p *endpoint, evs ...map[string]any) {
		t.Helper()
		status, body, err := produce(ctx, p, l, seq, evs)
		if err != nil || status != http.StatusOK {
			t.Fatalf("append %d on %s: %d %v %s", seq, p.name, status, err, body)
		}
		seq++
	}
	mustProduce(eps[2], map[string]any{"type": "message.started", "message_id": "m1", "role": "assistant"})
	var want strings.Builder
	for i := range 60 {
		d := fmt.Sprintf("%d ", i)
		want.WriteString(d)
		p := eps[i%3]
		if i%10 == 9 {
			// A retry after a lost answer, through another node: a
			// duplicate (204), not a second copy.
			mustProduce(p, delta("m1", d))
			status, body, err := produce(ctx, eps[(i+1)%3], l, seq-1, []map[string]any{delta("m1", d)})
			if err != nil || status != http.StatusNoContent {
				t.Fatalf("retry of append %d on %s: %d %v %s", seq-1, eps[(i+1)%3].name, status, err, body)
			}
			eps[(i+2)%3].mustCall(t, "POST", "/v1/runs/"+run.ID+"/heartbeat", map[string]any{}, http.StatusOK, nil, "Tether-Lease", l.Token)
			continue
		}
		mustProduce(p, delta("m1", d))
	}
	mustProduce(eps[1], map[string]any{"type": "message.finished", "message_id": "m1", "status": "done"},
		map[string]any{"type": "run.finished", "status": "done"})
	// Each node serves the run's end once notified of it.
	for _, p := range eps {
		p.waitRun(t, run.ID, 10*time.Second, "done", func(r tether.Run) bool { return r.Status.Terminal() })
	}

	log := eps[0].readLog(t, "/v1/runs/"+run.ID+"/events")
	var got strings.Builder
	for _, e := range log {
		if e.Type == "text.delta" {
			got.WriteString(e.Delta)
		}
	}
	if got.String() != want.String() {
		t.Fatalf("the log's deltas\n  %q\nwant\n  %q", got.String(), want.String())
	}
	for _, p := range eps {
		sameLog(t, p.name+"'s log", p.readLog(t, "/v1/runs/"+run.ID+"/events"), log)
		eventually(t, 5*time.Second, p.name+"'s final answer", func() bool {
			fa := p.finalAnswer(t, "t1")
			return fa.Complete && fa.Content == want.String()
		})
	}
}

// TestProducerRetryOnAnotherNode: a worker's append went through node a
// and committed, but its answer was lost; the worker retries it (same
// Producer-Seq) through node b, which last saw the producer one append
// earlier. The retry is a duplicate (204): the log holds the events once.
func TestProducerRetryOnAnotherNode(t *testing.T) {
	js := startJetStream(t)
	nodes := startNodes(t, js, 2, nodeOptions{})
	a, b := &nodes[0].endpoint, &nodes[1].endpoint
	knowAgent(t, "echo", a, b)
	a.createThread(t, "t1")
	var run tether.Run
	a.mustCall(t, "POST", "/v1/threads/t1/runs", map[string]any{"agent": "echo"}, http.StatusCreated, &run)
	_, l := claim(t, a, "w", "echo", 5*time.Second)
	steps := []struct {
		p    *endpoint
		seq  int
		want int
	}{
		{b, 0, http.StatusOK},        // b knows the producer at seq 0
		{a, 1, http.StatusOK},        // committed through a; say the answer was lost
		{b, 1, http.StatusNoContent}, // the retry through b
	}
	for i, s := range steps {
		status, body, err := produce(t.Context(), s.p, l, s.seq, []map[string]any{{"type": "custom", "name": fmt.Sprint("step ", i)}})
		if err != nil || status != s.want {
			t.Errorf("step %d: seq %d through %s: %d %v %s, want %d", i, s.seq, s.p.name, status, err, body, s.want)
		}
	}
	var customs []string
	for _, e := range a.readLog(t, "/v1/runs/"+run.ID+"/events") {
		if e.Type == "custom" {
			customs = append(customs, string(e.Raw))
		}
	}
	if len(customs) != 2 {
		t.Fatalf("the log holds %d custom events, want 2:\n%s", len(customs), strings.Join(customs, "\n"))
	}
}
