package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
)

// TestNodeKilledMidRun: three tether processes on one JetStream cluster
// (R3). A demo run is created through the first; whichever node's runner
// claims it (its worker_id says: inproc@<node>) is killed with SIGKILL in
// the middle. Its lease (2s) expires; a surviving node's sweeper ends the
// run aborted (worker_lost), once: the log has exactly one run.finished.
// Clients that followed the run through any node (those on the killed one
// resume on a survivor) all end with the same events, the abort included.
func TestNodeKilledMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three tether processes")
	}
	js := startJetStream(t)
	stream, _ := names(t)
	procs := make([]*proc, 3)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("tether-%d", i+1)
			procs[i] = startProc(t, id, "--store", js.urls, "--nats-stream", stream, "--nats-replicas", "3", "--node-id", id,
				"--lease-ttl", "2s", "--sweep-interval", "200ms", "--heartbeat", "1s", "--log-format", "json", "--shutdown-grace", "0s")
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	eps := make([]*endpoint, len(procs))
	for i, p := range procs {
		eps[i] = &p.endpoint
	}

	eps[0].createThread(t, "t1")
	run := eps[0].demoRun(t, "t1", "Who ends a run whose node died?", `{"tokens":1000,"delay_ms":10}`)
	running := eps[0].waitRun(t, run.ID, 10*time.Second, "running", func(r tether.Run) bool { return r.Status == tether.RunRunning })
	victim := -1
	for i, p := range procs {
		if running.WorkerID == "inproc@"+p.name {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("the run's worker_id is %q, not the in-process runner of a node", running.WorkerID)
	}
	var survivors []*endpoint
	for i, p := range eps {
		if i != victim {
			survivors = append(survivors, p)
		}
	}
	t.Logf("%s runs the run; %s and %s survive", procs[victim].name, survivors[0].name, survivors[1].name)

	// Two clients start on each node; a failed connection moves to a node
	// picked at random (the dead one refuses it, and it moves on).
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var cs []*cutClient
	for i := range 2 * len(eps) {
		c := &cutClient{name: fmt.Sprintf("client %d (first on %s)", i, eps[i%3].name), rng: rand.New(rand.NewPCG(seed, uint64(i))),
			nodes: eps, first: i % 3, failover: true}
		cs = append(cs, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.err = c.follow(ctx, "/v1/runs/"+run.ID+"/events")
		}()
	}

	// Kill the node in the middle of the answer.
	eventually(t, 20*time.Second, "the run to stream 100 events", func() bool {
		return len(survivors[0].readLog(t, "/v1/runs/"+run.ID+"/events")) >= 100
	})
	killed := time.Now()
	procs[victim].kill9()
	t.Logf("killed %s", procs[victim].name)

	ended := survivors[0].waitRun(t, run.ID, 20*time.Second, "ended", func(r tether.Run) bool { return r.Status.Terminal() })
	t.Logf("the run ended %s %v after the kill", ended.Status, time.Since(killed).Round(10*time.Millisecond))
	if ended.Status != tether.RunAborted || ended.Error == nil || ended.Error.Code != "worker_lost" {
		t.Fatalf("the run ended %s (%+v), want aborted worker_lost", ended.Status, ended.Error)
	}
	wg.Wait()
	survivors[1].waitRun(t, run.ID, 10*time.Second, "ended", func(r tether.Run) bool { return r.Status.Terminal() })

	log := survivors[0].readLog(t, "/v1/runs/"+run.ID+"/events")
	sameLog(t, survivors[1].name+"'s log", survivors[1].readLog(t, "/v1/runs/"+run.ID+"/events"), log)
	finished := 0
	for _, e := range log {
		if e.Type == "run.finished" {
			finished++
		}
	}
	if last := log[len(log)-1]; finished != 1 || last.Type != "run.finished" || last.Status != "aborted" || last.Error == nil || last.Error.Code != "worker_lost" {
		t.Fatalf("%d run.finished in the log; the last event %s", finished, last.Raw)
	}
	// The abort is decided by a survivor's sweeper, which logs it once its
	// commit holds: the line may come a moment after the event is seen.
	var deciders []string
	eventually(t, 10*time.Second, "a survivor to log the abort of the run", func() bool {
		deciders = nil
		for i, p := range procs {
			if n := len(p.logLines("run aborted", "run", run.ID)); n > 0 {
				if i == victim {
					t.Errorf("the killed node logged the abort")
				}
				deciders = append(deciders, fmt.Sprintf("%s (%d)", p.name, n))
			}
		}
		return len(deciders) > 0
	})
	t.Logf("abort logged by %s", strings.Join(deciders, ", "))
	moved := 0
	for _, c := range cs {
		if c.err != nil {
			t.Errorf("%s: %v", c.name, c.err)
			continue
		}
		moved += c.fails
		sameSequence(t, c.name, c.events, log)
	}
	t.Logf("%d events; clients failed over %d times", len(log), moved)
}
