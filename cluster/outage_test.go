package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents/demo"
	"github.com/tetherhq/tether/store/natsstore/natstest"
)

// TestSSEStartsWhileNATSDown: one node on a single NATS server (R1), which
// is shut down. New SSE streams of every kind get ":ok" at once, then
// start (from what the node holds) or end with reconnect (reason
// unavailable) after the node's SubscribeTimeout (1s here), never left
// without an answer until the store's own timeouts (20s here) or a thread
// load's (a minute) end: resuming from a cursor (checked in the store), a
// thread the node has not loaded, an unknown thread. Once the server is
// back, they start.
func TestSSEStartsWhileNATSDown(t *testing.T) {
	srv := natstest.StartServer(t)
	js := &jetStream{srvs: []*server.Server{srv}, urls: srv.ClientURL()}
	o := nodeOptions{Replicas: 1, StoreTimeout: 20 * time.Second, SubscribeTimeout: time.Second}
	a := startNode(t, js, "a", o)
	p := &a.endpoint
	knowAgent(t, "echo", p)
	p.createThread(t, "loaded")
	var run tether.Run
	p.mustCall(t, "POST", "/v1/threads/loaded/runs", map[string]any{"agent": "echo"}, http.StatusCreated, &run)
	log := p.readLog(t, "/v1/threads/loaded/events")
	// A thread a has never loaded: created through b.
	b := startNode(t, js, "b", o)
	b.createThread(t, "cold")
	b.stop()

	streams := []struct{ name, path, lastID string }{
		{"snapshot", "/v1/threads/loaded/events", ""},
		{"tail", "/v1/threads/loaded/events?offset=now", ""},
		{"run", "/v1/runs/" + run.ID + "/events", ""},
		{"resume", "/v1/threads/loaded/events", log[0].Offset},
		{"cold thread", "/v1/threads/cold/events", ""},
		{"unknown thread", "/v1/threads/nope/events", ""},
	}
	natstest.Stop(srv)
	var wg sync.WaitGroup
	for _, s := range streams {
		wg.Go(func() {
			// Below the store's timeout: an answer by then came from the
			// node's own bound.
			ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
			defer cancel()
			t0 := time.Now()
			st, err := p.openStream(ctx, s.path, s.lastID)
			if err != nil {
				t.Errorf("%s: %v (after %v)", s.name, err, time.Since(t0).Round(time.Millisecond))
				return
			}
			defer st.close()
			if f, err := st.next(); err != nil || !f.IsComment || f.Comment != "ok" {
				t.Errorf("%s: the stream starts with %+v %v, not :ok", s.name, f, err)
				return
			}
			f, err := st.next()
			switch {
			case err == nil && f.Event == "connected":
			case err == nil && f.Event == "reconnect" && strings.Contains(f.Data, `"reason":"unavailable"`):
			case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
				t.Errorf("%s: nothing after :ok %v after the store went down", s.name, time.Since(t0).Round(time.Millisecond))
			default:
				t.Errorf("%s: after :ok %+v %v, want connected or reconnect (unavailable)", s.name, f, err)
			}
		})
	}
	wg.Wait()

	natstest.Restart(t, srv)
	for _, s := range streams[3:5] {
		eventually(t, 30*time.Second, fmt.Sprintf("%s: a stream once the server is back", s.name), func() bool {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			st, err := p.openStream(ctx, s.path, s.lastID)
			if err != nil {
				return false
			}
			defer st.close()
			if f, err := st.next(); err != nil || !f.IsComment || f.Comment != "ok" {
				return false
			}
			f, err := st.next()
			return err == nil && f.Event == "connected"
		})
	}
}

// TestDemoRunRidesOutNATSOutage: one node on one NATS server (R1), the
// demo agent streaming a run in-process. Mid-run the server goes down,
// until the node has failed to store some of the run's events, and comes
// back. The run goes on and ends done, with the demo's whole answer once:
// the appends whose outcome was unknown were sent again with their
// producer sequence, and those the stream had stored after all were not
// stored twice. The run ended error (agent_error, "The agent failed.") at
// the first append the store could not take.
func TestDemoRunRidesOutNATSOutage(t *testing.T) {
	srv := natstest.StartServer(t)
	js := &jetStream{srvs: []*server.Server{srv}, urls: srv.ClientURL()}
	a := startNode(t, js, "a", nodeOptions{Replicas: 1, StoreTimeout: 2 * time.Second, LeaseTTL: time.Minute})
	a.createThread(t, "t1")
	opts := demo.Options{Tokens: 300, DelayMs: 10}
	run := a.demoRun(t, "t1", "Who holds a run up?", `{"tokens":300,"delay_ms":10}`)
	eventually(t, 30*time.Second, "the answer streaming", func() bool {
		n := 0
		for _, e := range a.readLog(t, "/v1/threads/t1/events") {
			if e.Type == tether.EventTextDelta {
				n++
			}
		}
		return n >= 10
	})
	failed := a.e.Counters().CommitErrors.Load()
	natstest.Stop(srv)
	eventually(t, 30*time.Second, "a commit failed", func() bool { return a.e.Counters().CommitErrors.Load() > failed })
	js.srvs[0] = natstest.Restart(t, srv)
	r := a.waitRun(t, run.ID, 90*time.Second, "ended", func(r tether.Run) bool { return r.Status.Terminal() })
	if r.Status != tether.RunDone {
		t.Fatalf("run %s %+v, want done", r.Status, r.Error)
	}
	var deltas []string
	finished := 0
	for _, e := range a.readLog(t, "/v1/threads/t1/events") {
		switch e.Type {
		case tether.EventTextDelta:
			deltas = append(deltas, e.Delta)
		case tether.EventRunFinished:
			finished++
		}
	}
	want := demo.Script("Who holds a run up?", opts).Text
	if got := strings.Join(deltas, ""); got != strings.Join(want, " ") || len(deltas) != len(want) || finished != 1 {
		t.Fatalf("the log holds %d text deltas and %d run.finished, want %d and 1; text\n%s\nwant\n%s",
			len(deltas), finished, len(want), got, strings.Join(want, " "))
	}
}
