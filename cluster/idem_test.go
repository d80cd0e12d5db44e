package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
)

// TestIdempotencyKeyAcrossNodes: a client retries a run's creation with
// one Idempotency-Key through two nodes at once (its first try timed out
// behind a load balancer). Both answers name one run, and the thread has
// one run.
func TestIdempotencyKeyAcrossNodes(t *testing.T) {
	js := startJetStream(t)
	nodes := startNodes(t, js, 2, nodeOptions{})
	knowAgent(t, "echo", &nodes[0].endpoint, &nodes[1].endpoint)
	for i := range 10 {
		tid := fmt.Sprintf("t%d", i)
		nodes[0].createThread(t, tid)
		nodes[1].mustCall(t, "GET", "/v1/threads/"+tid, nil, http.StatusOK, nil) // both hold it
		var wg sync.WaitGroup
		ids := make([]string, 2)
		for j, n := range nodes {
			wg.Go(func() {
				status, b, _, err := n.call(context.Background(), "POST", "/v1/threads/"+tid+"/runs",
					map[string]any{"agent": "echo", "multitask": "enqueue"}, "Idempotency-Key", "k")
				if err != nil || (status != http.StatusCreated && status != http.StatusOK) {
					t.Errorf("%s: %s: %d %s %v", tid, n.name, status, b, err)
					return
				}
				var r struct{ ID string }
				_ = json.Unmarshal(b, &r)
				ids[j] = r.ID
			})
		}
		wg.Wait()
		if ids[0] != ids[1] {
			t.Errorf("%s: one Idempotency-Key through two nodes made runs %s and %s", tid, ids[0], ids[1])
		}
		var snap struct{ Runs []struct{ ID string } }
		nodes[0].mustCall(t, "GET", "/v1/threads/"+tid, nil, http.StatusOK, &snap)
		if len(snap.Runs) != 1 {
			t.Errorf("%s: %d runs, want 1", tid, len(snap.Runs))
		}
	}
}
