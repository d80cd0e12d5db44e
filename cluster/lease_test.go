package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
)

// TestHealthyWorkersKeepTheirLeases: three nodes with a 2s lease TTL
// sweeping every 100ms, 400 pending runs in the active list (so a sweep
// reads for a while), and 8 workers that claim through one node and then
// alternate appends and heartbeats through the two others, each 100-400ms
// before the expiry last granted. A renewal answered 2xx with expiry X
// means the lease holds until X: no request is refused lease_lost before
// X, and no run is aborted worker_lost before X (the times are the
// server's and the test's one clock). A request that arrives after X
// because the machine is slow may be refused; that is counted, not failed.
func TestHealthyWorkersKeepTheirLeases(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about half a minute")
	}
	js := startJetStream(t)
	nodes := startNodes(t, js, 3, nodeOptions{LeaseTTL: 2 * time.Second, SweepInterval: 100 * time.Millisecond})
	var eps []*endpoint
	for _, n := range nodes {
		eps = append(eps, &n.endpoint)
	}
	knowAgent(t, "echo", eps...)
	knowAgent(t, "idle", eps...)

	const (
		idle    = 400
		workers = 8
		each    = 2 // runs per worker
		steps   = 6 // appends and heartbeats per run
	)
	parallel(t, idle, 16, func(i int) error {
		p := eps[i%3]
		tid := fmt.Sprintf("idle-%d", i)
		if s, b, _, err := p.call(t.Context(), "POST", "/v1/threads", map[string]any{"id": tid}); err != nil || s != http.StatusCreated {
			return fmt.Errorf("create %s: %d %v %s", tid, s, err, b)
		}
		if s, b, _, err := p.call(t.Context(), "POST", "/v1/threads/"+tid+"/runs", map[string]any{"agent": "idle"}); err != nil || s != http.StatusCreated {
			return fmt.Errorf("run on %s: %d %v %s", tid, s, err, b)
		}
		return nil
	})
	for i := range workers * each {
		tid := fmt.Sprintf("work-%d", i)
		eps[0].createThread(t, tid)
		eps[0].mustCall(t, "POST", "/v1/threads/"+tid+"/runs", map[string]any{"agent": "echo"}, http.StatusCreated, nil)
	}

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	var (
		mu      sync.Mutex
		granted = map[string]time.Time{} // run → the last expiry a 2xx granted
		late    atomic.Int64             // requests refused that arrived after the expiry
		steady  atomic.Int64             // requests answered 2xx
	)
	grant := func(rid string, exp time.Time) {
		mu.Lock()
		defer mu.Unlock()
		if exp.After(granted[rid]) {
			granted[rid] = exp
		}
	}
	var wg sync.WaitGroup
	for w := range workers {
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		wg.Go(func() {
			for range each {
				run, l, exp, err := claimLease(t.Context(), eps[0], fmt.Sprint("w", w))
				if err != nil {
					t.Error(err)
					return
				}
				grant(run, exp)
				alive := true
				for step := 0; step < steps && alive; step++ {
					time.Sleep(time.Until(exp.Add(-time.Duration(100+rng.IntN(300)) * time.Millisecond)))
					p := eps[1+(w+step)%2]
					path, body := "/v1/runs/"+run+"/heartbeat", any(map[string]any{})
					if step%2 == 0 {
						path, body = "/v1/runs/"+run+"/events", []map[string]any{{"type": "custom", "name": fmt.Sprint("step ", step)}}
					}
					status, b, _, err := p.call(t.Context(), "POST", path, body, "Tether-Lease", l)
					answered := time.Now()
					var res struct {
						LeaseExpiresAt tether.Time `json:"lease_expires_at"`
						Error          struct{ Code string }
					}
					_ = json.Unmarshal(b, &res)
					switch {
					case err != nil:
						t.Errorf("%s %s on %s: %v", run, path, p.name, err)
						return
					case status == http.StatusOK:
						steady.Add(1)
						exp = res.LeaseExpiresAt.Time
						grant(run, exp)
					case status == http.StatusGone && res.Error.Code == "lease_lost" && !answered.Before(exp):
						late.Add(1)
						alive = false
					default:
						t.Errorf("%s: step %d, %s on %s: %d %s, answered %v before the expiry granted last",
							run, step, path, p.name, status, b, exp.Sub(answered))
						alive = false
					}
				}
				if alive {
					status, b, _, err := eps[1].call(t.Context(), "POST", "/v1/runs/"+run+"/events",
						[]map[string]any{{"type": "run.finished", "status": "done"}}, "Tether-Lease", l)
					if err != nil || status != http.StatusOK {
						t.Errorf("%s: finish: %d %v %s", run, status, err, b)
					}
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d requests answered 2xx, %d refused after the expiry (late)", steady.Load(), late.Load())

	// Aborts come from the sweepers, up to a sweep after an expiry.
	time.Sleep(500 * time.Millisecond)
	for rid, exp := range granted {
		for _, e := range eps[2].readLog(t, "/v1/runs/"+rid+"/events") {
			if e.Type != "run.finished" || e.Status != "aborted" {
				continue
			}
			var ev struct{ TS tether.Time }
			_ = json.Unmarshal(e.Raw, &ev)
			if ev.TS.Before(exp) {
				t.Errorf("%s: aborted (%s) at %s, %v before the expiry a 2xx had granted", rid, e.Raw, ev.TS, exp.Sub(ev.TS.Time))
			}
		}
	}
}

// claimLease claims a run of agent echo through p and returns the run's
// ID, the lease token and its expiry.
func claimLease(ctx context.Context, p *endpoint, worker string) (string, string, time.Time, error) {
	status, b, _, err := p.call(ctx, "POST", "/v1/workers/claim",
		map[string]any{"worker_id": worker, "agents": []string{"echo"}, "wait_ms": 5000})
	if err != nil || status != http.StatusOK {
		return "", "", time.Time{}, fmt.Errorf("%s: claim: %d %v %s", p.name, status, err, b)
	}
	var c struct {
		Run   tether.Run `json:"run"`
		Lease struct {
			Token     string      `json:"token"`
			ExpiresAt tether.Time `json:"expires_at"`
		} `json:"lease"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return "", "", time.Time{}, err
	}
	return c.Run.ID, c.Lease.Token, c.Lease.ExpiresAt.Time, nil
}

// parallel runs fn(0..n-1) on width goroutines and fails the test on the
// first error.
func parallel(t testing.TB, n, width int, fn func(i int) error) {
	t.Helper()
	var next atomic.Int64
	errs := make(chan error, width)
	var wg sync.WaitGroup
	for range width {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}
