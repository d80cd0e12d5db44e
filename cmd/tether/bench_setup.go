package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	tether "github.com/tetherhq/tether"
)

// The agent name the bench's runs are for. The server accepts runs for an
// agent only once a worker asked for it, so the bench claims once first.
const benchAgent = "bench"

// leasedRun is a run that the bench holds as its worker.
type leasedRun struct {
	thread, run, token string
	events             *prepared // POST /v1/runs/{rid}/events with the lease
	message            string    // the message text.delta events go to
	body               []byte    // the body of every append, when it never changes
}

func (b *bencher) workerID() string { return "bench-" + b.runID }

// registerAgent makes the server accept runs for the bench agent.
func (b *bencher) registerAgent(ctx context.Context) error {
	_, err := b.api.call(ctx, http.MethodPost, "/v1/workers/claim",
		map[string]any{"worker_id": b.workerID(), "agents": []string{benchAgent}, "wait_ms": 0}, nil)
	if err != nil {
		return duringBench("register the bench agent (POST /v1/workers/claim)", err)
	}
	return nil
}

// newThread creates a thread with a name of this bench.
func (b *bencher) newThread(ctx context.Context) (string, error) {
	id := fmt.Sprintf("bench-%s-%d", b.runID, b.seq.Add(1))
	var th tether.Thread
	if _, err := b.api.call(ctx, http.MethodPost, "/v1/threads", map[string]any{"id": id}, &th); err != nil {
		return "", duringBench("create a thread", err)
	}
	return th.ID, nil
}

// startRuns creates n threads, each with one run of the bench agent, claims
// the runs and starts a message in each (for text.delta events).
func (b *bencher) startRuns(ctx context.Context, n int) ([]*leasedRun, error) {
	if err := b.registerAgent(ctx); err != nil {
		return nil, err
	}
	out := make([]*leasedRun, n)
	byRun := make(map[string]*leasedRun, n)
	var mu sync.Mutex
	err := parallel(ctx, n, 16, func(ctx context.Context, i int) error {
		tid, err := b.newThread(ctx)
		if err != nil {
			return err
		}
		var run tether.Run
		_, err = b.api.call(ctx, http.MethodPost, "/v1/threads/"+tid+"/runs", map[string]any{
			"agent": benchAgent,
			"input": map[string]any{"messages": []map[string]string{{"role": "user", "content": "bench"}}},
		}, &run)
		if err != nil {
			return duringBench("create a run", err)
		}
		lr := &leasedRun{thread: tid, run: run.ID, message: "bench-msg"}
		mu.Lock()
		out[i], byRun[run.ID] = lr, lr
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}

	// Claim until every run of ours is held. Runs of another bench are
	// left to expire.
	deadline := time.Now().Add(30 * time.Second)
	for left := n; left > 0; {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("claim the bench's runs: %d of %d never came (is another worker taking %q runs?)", left, n, benchAgent)
		}
		var c struct {
			Run   tether.Run `json:"run"`
			Lease struct {
				Token string `json:"token"`
			} `json:"lease"`
		}
		status, err := b.api.call(ctx, http.MethodPost, "/v1/workers/claim",
			map[string]any{"worker_id": b.workerID(), "agents": []string{benchAgent}, "wait_ms": 1000}, &c)
		if err != nil {
			return nil, duringBench("claim a run", err)
		}
		if status == http.StatusNoContent {
			continue
		}
		if lr := byRun[c.Run.ID]; lr != nil && lr.token == "" {
			lr.token = c.Lease.Token
			left--
		}
	}
	err = parallel(ctx, n, 16, func(ctx context.Context, i int) error {
		lr := out[i]
		var err error
		if lr.events, err = b.api.prepare(http.MethodPost, "/v1/runs/"+lr.run+"/events", "Tether-Lease", lr.token); err != nil {
			return err
		}
		return b.appendJSON(ctx, lr, []map[string]any{{"type": tether.EventMessageStarted, "message_id": lr.message, "role": "assistant"}})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// appendJSON appends events to a held run.
func (b *bencher) appendJSON(ctx context.Context, lr *leasedRun, evs any) error {
	body, err := json.Marshal(evs)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	status, err := b.api.send(ctx, lr.events, body, &buf)
	if err == nil && status != http.StatusOK {
		err = serverErr(status, buf.Bytes())
	}
	if err != nil {
		return duringBench("append to run "+lr.run, err)
	}
	return nil
}

// finishRuns ends the bench's runs, so that their threads are idle and
// nothing is left for the lease sweeper. It is best effort and bounded:
// the results are already in.
func (b *bencher) finishRuns(runs []*leasedRun) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = parallel(ctx, len(runs), 16, func(ctx context.Context, i int) error {
		lr := runs[i]
		if lr == nil || lr.events == nil {
			return nil
		}
		_ = b.appendJSON(ctx, lr, []map[string]any{
			{"type": tether.EventMessageFinished, "message_id": lr.message, "status": "done"},
			{"type": tether.EventRunFinished, "status": "done"},
		})
		return nil
	})
}

// parallel calls f for 0..n-1 with at most width calls at once, and
// returns the first error (the other calls see their context cancelled).
func parallel(ctx context.Context, n, width int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, width)
	var wg sync.WaitGroup
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(ctx, i); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}
