package cluster

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tetherhq/tether/store/natsstore/natstest"
)

// quorumRun sets up two nodes, an external run claimed through the first,
// and two appends (producer "w", seq 0 and 1), then stops two of the three
// NATS servers: the stream has no quorum.
func quorumRun(t *testing.T) (js *jetStream, a, b *endpoint, l lease, before int) {
	js = startJetStream(t)
	// A store timeout of 3s instead of 10s: the outage costs a third.
	nodes := startNodes(t, js, 2, nodeOptions{LeaseTTL: 5 * time.Minute, StoreTimeout: 3 * time.Second})
	a, b = &nodes[0].endpoint, &nodes[1].endpoint
	knowAgent(t, "echo", a, b)
	a.createThread(t, "t1")
	var run struct{ ID string }
	a.mustCall(t, "POST", "/v1/threads/t1/runs", map[string]any{"agent": "echo"}, http.StatusCreated, &run)
	_, l = claim(t, a, "w", "echo", 5*time.Second)
	for seq, p := range []*endpoint{a, b} {
		status, body, err := produce(t.Context(), p, l, seq, []map[string]any{{"type": "custom", "name": "before"}})
		if err != nil || status != http.StatusOK {
			t.Fatalf("append %d through %s: %d %v %s", seq, p.name, status, err, body)
		}
	}
	// b made the last append, so its log has it (a's may not yet).
	before = len(b.readLog(t, "/v1/runs/"+run.ID+"/events"))
	natstest.Stop(js.srvs[1])
	natstest.Stop(js.srvs[2])
	t.Log("two of three NATS servers are down")
	return js, a, b, l, before
}

// customNames returns the names of the custom events of a run's log from
// index from on.
func customNames(t *testing.T, p *endpoint, runID string, from int) []string {
	var names []string
	for _, e := range p.readLog(t, "/v1/runs/"+runID+"/events")[from:] {
		var ev struct{ Name string }
		_ = jsonUnmarshal(e.Raw, &ev)
		names = append(names, ev.Name)
	}
	return names
}

// TestNATSQuorumLost: without quorum, writes fail (5xx, after the store's
// request timeout, here 3s) while what a node answers from memory (a loaded
// thread's snapshot, a run) still works. (/readyz turns 503 once a node has
// not followed the log for the request timeout: TestReadyzWhileNotFollowingTheLog.) Once one server is back,
// writes work again without restarting any Tether node, and both nodes
// serve the same log.
func TestNATSQuorumLost(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the store's request timeout")
	}
	js, a, b, l, before := quorumRun(t)

	t0 := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	status, body, err := produce(ctx, a, l, 2, []map[string]any{{"type": "custom", "name": "during"}})
	cancel()
	t.Logf("an append without quorum: %d %v after %v: %.200s", status, err, time.Since(t0).Round(100*time.Millisecond), body)
	if err != nil || status < 500 {
		t.Fatalf("an append without quorum answered %d %v %s, want a 5xx", status, err, body)
	}
	for _, p := range []*endpoint{a, b} {
		for _, path := range []string{"/v1/threads/t1", "/v1/runs/" + l.RunID} {
			status, body, _, err := p.call(t.Context(), "GET", path, nil)
			if err != nil || status != http.StatusOK {
				t.Errorf("%s: GET %s without quorum: %d %v %.200s", p.name, path, status, err, body)
			}
		}
	}

	js.srvs[1] = natstest.Restart(t, js.srvs[1])
	back := time.Now()
	for attempt := 0; ; attempt++ {
		// A new append (not a retry of the refused one, which
		// TestRetryAfterUnknownOutcome covers), without a client timeout:
		// each attempt ends with the node's answer.
		ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
		status, body, _, err = b.call(ctx, "POST", "/v1/runs/"+l.RunID+"/events", []map[string]any{{"type": "custom", "name": "after"}},
			"Tether-Lease", l.Token)
		cancel()
		if err == nil && status == http.StatusOK {
			break
		}
		t.Logf("append through %s %v after the server came back: %d %v %.150s", b.name, time.Since(back).Round(100*time.Millisecond), status, err, body)
		if time.Since(back) > 90*time.Second {
			t.Fatalf("no append works 90s after the quorum came back")
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("appends work again %v after the server came back", time.Since(back).Round(100*time.Millisecond))
	// Each node serves the commits, its own and the other's, once its
	// consumer of the log reports them: under load (a consumer that fell
	// behind and restarts) that can trail the acknowledgement. The refused
	// append may also land late, once the stream has a quorum.
	var got, want []logEvent
	var names []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, want = a.readLog(t, "/v1/runs/"+l.RunID+"/events"), b.readLog(t, "/v1/runs/"+l.RunID+"/events")
		names = customNames(t, b, l.RunID, before)
		if len(got) == len(want) && strings.Contains(strings.Join(names, " "), "after") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	sameLog(t, a.name+"'s log", got, want)
	if len(names) == 0 {
		t.Fatalf("after the outage %s's log has nothing new", b.name)
	}
	if n := strings.Count(strings.Join(names, " "), "during"); n > 1 || names[len(names)-1] != "after" {
		t.Fatalf("after the outage the log has %v", names)
	}
	// The refused append's outcome was unknown to its node: it may be in
	// the log (the stream stored it once it had a quorum again).
	t.Logf("after the outage the log has %v", names)
}

// TestRetryAfterUnknownOutcome: an append whose outcome is unknown (the
// stream had no quorum) is retried with the same Producer-Seq until it gets
// a 2xx. The 2xx must be true: the append is in the log, once.
func TestRetryAfterUnknownOutcome(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the store's request timeout")
	}
	js, a, b, l, before := quorumRun(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	status, body, err := produce(ctx, a, l, 2, []map[string]any{{"type": "custom", "name": "during"}})
	cancel()
	t.Logf("an append without quorum: %d %v %.200s", status, err, body)
	js.srvs[1] = natstest.Restart(t, js.srvs[1])
	back := time.Now()
	for p := b; ; {
		// The worker's client gives up after 20s and retries.
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		status, body, err = produce(ctx, p, l, 2, []map[string]any{{"type": "custom", "name": "retry"}})
		cancel()
		t.Logf("retry through %s %v after the server came back: %d %v %.150s", p.name, time.Since(back).Round(100*time.Millisecond), status, err, body)
		if err == nil && (status == http.StatusOK || status == http.StatusNoContent) {
			break
		}
		if time.Since(back) > 90*time.Second {
			t.Fatalf("no 2xx 90s after the quorum came back")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Let a commit still in flight end, one way or the other.
	time.Sleep(10 * time.Second)
	if names := customNames(t, b, l.RunID, before); len(names) != 1 {
		t.Fatalf("the worker got a 2xx for Producer-Seq 2; the log has after the outage %v, want it once", names)
	}
}
