package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store/natsstore/natstest"
)

// streamLeader returns the index of the server that leads stream.
func streamLeader(t testing.TB, srvs []*server.Server, stream string) int {
	t.Helper()
	for i, s := range srvs {
		if s.Running() && s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	t.Fatalf("stream %s has no leader", stream)
	return -1
}

// TestNATSServerKilledMidRun: three in-process nodes on a three-server
// JetStream cluster (R3). An external worker appends to a run, one event
// per request, through the nodes in turn, retrying each append (same
// Producer-Seq, next node) until it gets a 2xx; clients follow the run
// through every node. In the middle, the server that leads the log's
// stream is shut down. Every append the worker got a 2xx for is in the
// log once, in order; the run finishes; every client saw the whole log.
func TestNATSServerKilledMidRun(t *testing.T) {
	js := startJetStream(t)
	nodes := startNodes(t, js, 3, nodeOptions{LeaseTTL: 30 * time.Second})
	var eps []*endpoint
	for _, n := range nodes {
		eps = append(eps, &n.endpoint)
	}
	knowAgent(t, "echo", eps...)
	eps[0].createThread(t, "t1")
	var run struct{ ID string }
	eps[0].mustCall(t, "POST", "/v1/threads/t1/runs", map[string]any{"agent": "echo"}, http.StatusCreated, &run)
	_, l := claim(t, eps[1], "w", "echo", 5*time.Second)

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var cs []*cutClient
	for i := range 6 {
		c := &cutClient{name: fmt.Sprintf("client %d", i), rng: rand.New(rand.NewPCG(seed, uint64(i))), nodes: eps, first: i % 3,
			cutsLeft: 2, failover: true}
		cs = append(cs, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.err = c.follow(ctx, "/v1/runs/"+run.ID+"/events")
		}()
	}

	const appends = 300
	stream, _ := names(t)
	var (
		acked      []int // the appends that got a 2xx, in order
		retries    int
		worst      time.Duration // the longest time from first try to 2xx
		killedAt   = -1
		failStatus = map[string]int{}
	)
	at := 0
	try := func(seq int, evs ...map[string]any) {
		t0 := time.Now()
		for attempt := 0; ; attempt++ {
			if ctx.Err() != nil {
				t.Fatalf("append %d: no 2xx before the deadline (%d retries)", seq, attempt)
			}
			p := eps[at%3]
			at++
			actx, acancel := context.WithTimeout(ctx, 15*time.Second)
			status, body, err := produce(actx, p, l, seq, evs)
			acancel()
			if err == nil && (status == http.StatusOK || status == http.StatusNoContent) {
				worst = max(worst, time.Since(t0))
				return
			}
			retries++
			key := fmt.Sprint(status)
			if err != nil {
				key = "transport error"
			} else if status != http.StatusServiceUnavailable && status != http.StatusInternalServerError {
				t.Fatalf("append %d on %s: %d %s", seq, p.name, status, body)
			}
			failStatus[key]++
			t.Logf("append %d through %s: %s after %v: %.200s", seq, p.name, key, time.Since(t0).Round(time.Millisecond), body)
			time.Sleep(50 * time.Millisecond)
		}
	}
	try(0, map[string]any{"type": "message.started", "message_id": "m1", "role": "assistant"})
	for i := 1; i <= appends; i++ {
		if i == appends/3 {
			leader := streamLeader(t, js.srvs, stream)
			t.Logf("shutting down %s, the leader of the log's stream", js.srvs[leader].Name())
			natstest.Stop(js.srvs[leader])
			killedAt = i
		}
		try(i, delta("m1", fmt.Sprintf("%d ", i)))
		acked = append(acked, i)
	}
	try(appends+1, map[string]any{"type": "message.finished", "message_id": "m1", "status": "done"},
		map[string]any{"type": "run.finished", "status": "done"})
	lastAck := time.Now()
	for _, p := range eps {
		p.waitRun(t, run.ID, 30*time.Second, "done", func(r tether.Run) bool { return r.Status.Terminal() })
		t.Logf("%s shows the run done %v after the last append", p.name, time.Since(lastAck).Round(time.Millisecond))
	}
	t.Logf("the server went down before append %d; %d retries %v; the slowest append took %v", killedAt, retries, failStatus, worst.Round(time.Millisecond))

	t0 := time.Now()
	wg.Wait()
	t.Logf("the clients were done %v after the last append", time.Since(t0).Round(time.Millisecond))
	log := eps[0].readLog(t, "/v1/runs/"+run.ID+"/events")
	var got, want strings.Builder
	for _, i := range acked {
		fmt.Fprintf(&want, "%d ", i)
	}
	finished := 0
	for _, e := range log {
		switch e.Type {
		case "text.delta":
			got.WriteString(e.Delta)
		case "run.finished":
			finished++
		}
	}
	if got.String() != want.String() {
		t.Fatalf("the log's deltas\n  %q\nthe acknowledged appends\n  %q", got.String(), want.String())
	}
	if finished != 1 || log[len(log)-1].Type != "run.finished" || log[len(log)-1].Status != "done" {
		t.Fatalf("%d run.finished; the last event %s", finished, log[len(log)-1].Raw)
	}
	for _, p := range eps[1:] {
		sameLog(t, p.name+"'s log", p.readLog(t, "/v1/runs/"+run.ID+"/events"), log)
	}
	for _, c := range cs {
		if c.err != nil {
			t.Errorf("%s: %v", c.name, c.err)
			continue
		}
		sameSequence(t, c.name, c.events, log)
	}
}
