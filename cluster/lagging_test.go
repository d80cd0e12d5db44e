package cluster

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
)

// laggingPair starts node a on the cluster and node b connected to one
// server through a proxy that delays what b receives by lag: b folds a's
// commits that much later.
func laggingPair(t *testing.T, lag time.Duration) (a, b *node) {
	js := startJetStream(t)
	a = startNode(t, js, "a", nodeOptions{})
	proxy := startLagProxy(t, strings.TrimPrefix(js.srvs[0].ClientURL(), "nats://"), lag)
	b = startNode(t, js, "b", nodeOptions{URL: "nats://" + proxy})
	return a, b
}

// externalRun creates a run of the external agent "echo" on thread tid
// through p (after a claim that makes p accept the name).
func externalRun(t *testing.T, p *endpoint, tid string) tether.Run {
	t.Helper()
	p.mustCall(t, "POST", "/v1/workers/claim", map[string]any{"worker_id": "w", "agents": []string{"echo"}, "wait_ms": 0}, http.StatusNoContent, nil)
	var r tether.Run
	p.mustCall(t, "POST", "/v1/threads/"+tid+"/runs", map[string]any{"agent": "echo",
		"input": map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}}}, http.StatusCreated, &r)
	return r
}

// TestCursorFromAnotherNode: a client got an event from node a and
// resumes on node b before b folded it. The cursor is in the log, so b
// must resume after it (no reset snapshot).
func TestCursorFromAnotherNode(t *testing.T) {
	a, b := laggingPair(t, 150*time.Millisecond)
	a.createThread(t, "t1")
	b.mustCall(t, "GET", "/v1/threads/t1", nil, http.StatusOK, nil) // b has t1 in memory
	externalRun(t, &a.endpoint, "t1")
	log := a.readLog(t, "/v1/threads/t1/events")
	cursor := log[len(log)-1].Offset
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	st, err := b.openStream(ctx, "/v1/threads/t1/events", cursor)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	for { // nothing follows the cursor: only :ok, connected and pings
		f, err := st.next()
		if err != nil {
			return
		}
		if f.Event == "snapshot" || f.HasID {
			t.Fatalf("resumed after %s (the last event of the log) on the other node: got %s %.300s", cursor, f.Event, f.Data)
		}
	}
}

// TestDeleteSeenByOtherNodes: a thread deleted through node a is gone on
// node b too: b's open streams of it end, and b answers 404.
func TestDeleteSeenByOtherNodes(t *testing.T) {
	js := startJetStream(t)
	nodes := startNodes(t, js, 2, nodeOptions{})
	a, b := nodes[0], nodes[1]
	a.createThread(t, "t1")
	a.demoRun(t, "t1", "hello", `{"tokens":5,"delay_ms":0}`)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := b.openStream(ctx, "/v1/threads/t1/events?after=-1", "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			if _, err := st.next(); err != nil {
				return
			}
		}
	}()
	eventually(t, 10*time.Second, "the run to end", func() bool {
		var snap tether.Snapshot
		b.mustCall(t, "GET", "/v1/threads/t1", nil, http.StatusOK, &snap)
		return snap.Thread.Status == tether.ThreadIdle
	})
	a.mustCall(t, "DELETE", "/v1/threads/t1", nil, http.StatusNoContent, nil)
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Errorf("node b's stream of the deleted thread is still open 5s after the delete")
	}
	eventually(t, 5*time.Second, "node b to answer 404 for the deleted thread", func() bool {
		status, _, _, err := b.call(t.Context(), "GET", "/v1/threads/t1", nil)
		return err == nil && status == http.StatusNotFound
	})
}

// TestRecreatedThreadOnOtherNodes: a thread deleted and created again
// (same ID) through node a shows only its new content on node b.
func TestRecreatedThreadOnOtherNodes(t *testing.T) {
	js := startJetStream(t)
	nodes := startNodes(t, js, 2, nodeOptions{})
	a, b := nodes[0], nodes[1]
	a.createThread(t, "t1")
	r := a.demoRun(t, "t1", "first", `{"tokens":5,"delay_ms":0}`)
	b.waitRun(t, r.ID, 10*time.Second, "done", func(r tether.Run) bool { return r.Status == tether.RunDone })
	a.mustCall(t, "DELETE", "/v1/threads/t1", nil, http.StatusNoContent, nil)
	a.createThread(t, "t1")
	r2 := a.demoRun(t, "t1", "second", `{"tokens":5,"delay_ms":0}`)
	a.waitRun(t, r2.ID, 10*time.Second, "done", func(r tether.Run) bool { return r.Status == tether.RunDone })
	var want, got tether.Snapshot
	a.mustCall(t, "GET", "/v1/threads/t1", nil, http.StatusOK, &want)
	eventually(t, 5*time.Second, "node b to show the new thread as node a does", func() bool {
		b.mustCall(t, "GET", "/v1/threads/t1", nil, http.StatusOK, &got)
		return got.Offset == want.Offset
	})
	if len(got.Messages) != len(want.Messages) || len(got.Runs) != len(want.Runs) {
		t.Fatalf("node b shows %d messages and %d runs, node a %d and %d", len(got.Messages), len(got.Runs), len(want.Messages), len(want.Runs))
	}
}

// TestWorkerAgentOnEveryNode: a worker long-polls claims on one node (a
// load balancer keeps its connection there); a client creates a run of
// its agent through another node.
func TestWorkerAgentOnEveryNode(t *testing.T) {
	js := startJetStream(t)
	nodes := startNodes(t, js, 2, nodeOptions{})
	a, b := nodes[0], nodes[1]
	a.mustCall(t, "POST", "/v1/workers/claim", map[string]any{"worker_id": "w", "agents": []string{"echo"}, "wait_ms": 0}, http.StatusNoContent, nil)
	b.createThread(t, "t1")
	b.mustCall(t, "POST", "/v1/threads/t1/runs", map[string]any{"agent": "echo"}, http.StatusCreated, nil)
}
