package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
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

// lossyProxy forwards every request to a real server, but answers the
// next request that matches a rule with 503 unavailable after the server
// did it: a write that landed whose outcome the client cannot know, as
// when a JetStream publish's ack timed out.
type lossyProxy struct {
	mu    sync.Mutex
	rules []string // "METHOD path-suffix", each used once
	lost  []string
}

func (p *lossyProxy) loseNext(method, pathSuffix string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, method+" "+pathSuffix)
}

func (p *lossyProxy) take(r *http.Request) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, rule := range p.rules {
		method, suffix, _ := strings.Cut(rule, " ")
		if r.Method == method && strings.HasSuffix(r.URL.Path, suffix) {
			p.rules = append(p.rules[:i], p.rules[i+1:]...)
			p.lost = append(p.lost, rule)
			return true
		}
	}
	return false
}

// serverBehindLossyProxy starts a real server (SQLite store, the demo
// agent in process) behind a lossyProxy, and a client of the proxy.
func serverBehindLossyProxy(t *testing.T) (*client.Client, *lossyProxy, *client.Client) {
	t.Helper()
	e := engine.New(testutil.OpenStore(t, ""), engine.Options{})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	rn := runner.New(e, map[string]agents.Agent{"demo": demo.New()}, runner.Options{})
	rn.Start()
	srv := api.New(e, api.Options{})
	real := httptest.NewServer(srv.Handler())
	target, _ := url.Parse(real.URL)
	p := &lossyProxy{}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(res *http.Response) error {
		if res.StatusCode/100 != 2 || !p.take(res.Request) {
			return nil
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		body := `{"error":{"code":"unavailable","message":"the request timed out; its outcome is unknown, retry it"}}`
		res.StatusCode, res.Status = http.StatusServiceUnavailable, "503 Service Unavailable"
		res.Header = http.Header{"Content-Type": {"application/json"}}
		res.Body, res.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
		return nil
	}
	proxy := httptest.NewServer(rp)
	t.Cleanup(func() {
		proxy.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = rn.Shutdown(ctx)
		srv.Shutdown()
		real.Close()
		e.Close()
	})
	opts := &client.Options{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	return client.New(proxy.URL, opts), p, client.New(real.URL, opts)
}

// A thread created without an id, whose creation landed but was answered
// 503, is one thread: the client names the thread itself, so its retry is
// a create-if-absent. Before, the client let the server name it and sent
// the create again after the 503: two threads.
func TestCreateThreadLostAnswer(t *testing.T) {
	c, p, direct := serverBehindLossyProxy(t)
	ctx := context.Background()
	p.loseNext("POST", "/v1/threads")
	th, err := c.CreateThread(ctx, "", map[string]int{"k": 1})
	if err != nil {
		t.Fatal(err)
	}
	threads, _, err := direct.Threads(ctx, client.ThreadQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(threads) != 1 || threads[0].ID != th.ID || !strings.HasPrefix(th.ID, "thr_") {
		t.Fatalf("threads %+v, want the one thread %s", threads, th.ID)
	}
	if len(p.lost) != 1 {
		t.Fatalf("answers lost: %v", p.lost)
	}
}

// An answer that landed but was answered 503 is retried and taken for
// what it is: SubmitInput returns nil, the run got one run.input and goes
// on. Before, the retry got 409 conflict ("not waiting on request"),
// which the caller saw as a failure although its answer was taken.
func TestSubmitInputLostAnswer(t *testing.T) {
	c, p, direct := serverBehindLossyProxy(t)
	ctx := context.Background()
	th, err := direct.CreateThread(ctx, "t1", nil)
	if err != nil {
		t.Fatal(err)
	}
	run, err := direct.CreateRun(ctx, th.ID, client.RunRequest{Agent: "demo",
		Input:    tether.RunInput{Messages: []tether.InputMessage{{Role: tether.RoleUser, Content: "hi"}}},
		Metadata: map[string]any{"demo": map[string]any{"ask": true, "tool": false, "reasoning": false, "tokens": 3, "delay_ms": 0}}})
	if err != nil {
		t.Fatal(err)
	}
	var req *tether.Request
	testutil.Eventually(t, 10*time.Second, "the run waiting", func() bool {
		s, err := direct.Run(ctx, run.ID)
		if err == nil && s.Runs[0].Status == tether.RunWaiting {
			req = s.Runs[0].Request
		}
		return req != nil
	})
	p.loseNext("POST", "/input")
	if err := c.SubmitInput(ctx, run.ID, req.ID, "streams"); err != nil {
		t.Fatalf("an answer that was taken: %v", err)
	}
	inputs := 0
	for u, err := range direct.Subscribe(ctx, client.SubscribeRequest{RunID: run.ID, After: tether.OffsetStart}) {
		if err != nil {
			t.Fatal(err)
		}
		if u.Event != nil && u.Event.Type == tether.EventRunInput {
			inputs++
		}
		if u.Event != nil && u.Event.Type == tether.EventRunFinished && u.Event.Status != string(tether.RunDone) {
			t.Fatalf("run ended %s", u.Event.Status)
		}
	}
	if inputs != 1 || len(p.lost) != 1 {
		t.Fatalf("%d run.input events (answers lost: %v), want 1", inputs, p.lost)
	}
	// Another answer to the request that was answered is still refused.
	if err := c.SubmitInput(ctx, run.ID, req.ID, "other"); tether.CodeOf(err) != tether.CodeConflict {
		t.Fatalf("another answer: %v, want conflict", err)
	}
}

// A delete that landed but was answered 503 is retried, finds no thread,
// and returns nil: the thread is gone, as asked. Before, the retry's 404
// came back as not_found. A delete of a thread that never existed, with
// no failure before, is still not_found.
func TestDeleteThreadLostAnswer(t *testing.T) {
	c, p, direct := serverBehindLossyProxy(t)
	ctx := context.Background()
	if _, err := direct.CreateThread(ctx, "t1", nil); err != nil {
		t.Fatal(err)
	}
	p.loseNext("DELETE", "/v1/threads/t1")
	if err := c.DeleteThread(ctx, "t1"); err != nil {
		t.Fatalf("a delete that was done: %v", err)
	}
	if _, err := direct.Thread(ctx, "t1"); !errors.Is(err, tether.ErrNotFound) {
		t.Fatalf("the thread after its delete: %v", err)
	}
	if err := c.DeleteThread(ctx, "t1"); !errors.Is(err, tether.ErrNotFound) {
		t.Fatalf("a delete of no thread: %v, want not_found", err)
	}
}

// CreateRun (its Idempotency-Key) and CancelRun (a cancel of a run that
// has one pending, or ended, changes nothing) were safe to repeat already:
// one run, cancelled once.
func TestCreateRunAndCancelLostAnswer(t *testing.T) {
	c, p, direct := serverBehindLossyProxy(t)
	ctx := context.Background()
	if _, err := direct.CreateThread(ctx, "t1", nil); err != nil {
		t.Fatal(err)
	}
	p.loseNext("POST", "/v1/threads/t1/runs")
	run, err := c.CreateRun(ctx, "t1", client.RunRequest{Agent: "demo",
		Metadata: map[string]any{"demo": map[string]any{"ask": true}}})
	if err != nil {
		t.Fatal(err)
	}
	p.loseNext("POST", "/cancel")
	if _, err := c.CancelRun(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	snap, err := direct.Thread(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Runs) != 1 || snap.Runs[0].ID != run.ID || len(p.lost) != 2 {
		t.Fatalf("runs %+v (answers lost: %v), want the one run %s", snap.Runs, p.lost, run.ID)
	}
	var buf bytes.Buffer
	for u, err := range direct.Subscribe(ctx, client.SubscribeRequest{RunID: run.ID, After: tether.OffsetStart}) {
		if err != nil {
			t.Fatal(err)
		}
		if u.Event != nil && u.Event.Type == tether.EventRunCancelRequested {
			buf.WriteString("c")
		}
	}
	if buf.Len() > 1 {
		t.Fatalf("%d cancel requests, want at most 1", buf.Len())
	}
}
