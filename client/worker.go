package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
)

// WorkerOptions configure a [Worker].
type WorkerOptions struct {
	// ID names the worker in its claims and in its runs' worker_id; it is
	// also the Producer-Id of its appends (the server keeps producer state
	// per run). 1 to 255 bytes. Defaults to "<hostname>-<pid>".
	ID string
	// Agents are the agents the worker runs, by agent name. Required.
	Agents map[string]agents.Agent
	// Concurrency is how many runs may execute at once. Defaults to 4.
	Concurrency int
	// Resumable says the agents can resume a run from its log. Claims then
	// ask for it, so that a run whose worker is lost waits for another
	// worker (it comes back with Run.Attempt above 1) instead of ending
	// aborted.
	Resumable bool
	// ClaimWait is how long one claim waits for a run (a long poll; the
	// server caps it at its maximum). Defaults to 30s.
	ClaimWait time.Duration
	// StopWait bounds how long Run waits, once its context ended, for the
	// running agents to return. Defaults to 10s.
	StopWait time.Duration
	// Logger gets the worker's lines: claim and append retries, agent
	// failures (with the real error), runs left to the server. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// Worker defaults, used when WorkerOptions leaves them zero.
const (
	DefaultWorkerConcurrency = 4
	DefaultClaimWait         = 30 * time.Second
	DefaultStopWait          = 10 * time.Second
)

// Worker claims runs from the server for its agents and runs each one
// like the server's in-process runner does (see the package
// documentation, "Workers"). Create one with [Client.NewWorker].
type Worker struct {
	c       *Client
	opts    WorkerOptions
	names   []string
	log     *slog.Logger
	running atomic.Bool
}

// NewWorker returns a worker for opts.Agents. It returns an error if opts
// names no agent, maps a name to nil, or has an ID over 255 bytes.
func (c *Client) NewWorker(opts WorkerOptions) (*Worker, error) {
	if len(opts.Agents) == 0 {
		return nil, errors.New("client: a worker needs at least one agent")
	}
	w := &Worker{c: c, opts: opts, log: opts.Logger}
	for name, a := range opts.Agents {
		if name == "" || a == nil {
			return nil, fmt.Errorf("client: worker agent %q: a name and an agent are needed", name)
		}
		w.names = append(w.names, name)
	}
	sort.Strings(w.names)
	if w.opts.ID == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "worker"
		}
		w.opts.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if len(w.opts.ID) > 255 {
		return nil, errors.New("client: a worker ID must be at most 255 bytes")
	}
	if w.opts.Concurrency <= 0 {
		w.opts.Concurrency = DefaultWorkerConcurrency
	}
	if w.opts.ClaimWait <= 0 {
		w.opts.ClaimWait = DefaultClaimWait
	}
	if w.opts.StopWait <= 0 {
		w.opts.StopWait = DefaultStopWait
	}
	if w.log == nil {
		w.log = slog.Default()
	}
	return w, nil
}

// ID returns the worker's ID.
func (w *Worker) ID() string { return w.opts.ID }

// Causes of the end of a run's context.
var (
	errCancelRequested = errors.New("a client asked to cancel the run")
	errRunEnded        = errors.New("the run ended")
	errLeaseLost       = tether.Errorf(tether.CodeLeaseLost, "the lease on the run is lost")
	errShutdown        = errors.New("the worker is stopping")
	errAgentReturned   = errors.New("the agent returned")
)

// Run claims runs and runs them until ctx ends. Claims that fail (the
// server is down or restarting) are retried with backoff, forever, not
// sooner than a 429's or 503's Retry-After (up to MaxBackoff).
//
// When ctx ends, Run stops claiming and cancels the running agents, but
// does not finish their runs: it stops heartbeating and returns once the
// agents returned, or after StopWait. The server then aborts those runs
// when their leases expire (worker_lost), or hands them to another worker
// if the agents are Resumable.
//
// Run returns nil after ctx ended, or the error of a claim the server
// refused for good (400, 401, 403: a bad worker ID or token, a role that
// may not claim). It returns an error at once if the worker is already
// running.
func (w *Worker) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("client: the worker is already running")
	}
	defer w.running.Store(false)

	// The runs outlive ctx by a bounded wait: runs ends the agents, hard
	// ends the rest (a finish in progress) once the wait is over.
	base := context.WithoutCancel(ctx)
	runs, stopRuns := context.WithCancelCause(base)
	hard, kill := context.WithCancel(base)
	defer kill()

	var active sync.WaitGroup
	sem := make(chan struct{}, w.opts.Concurrency)
	err := w.claimLoop(ctx, sem, func(cl *claimed) {
		active.Add(1)
		go func() {
			defer func() { <-sem; active.Done() }()
			w.execute(runs, hard, cl)
		}()
	})
	stopRuns(errShutdown)
	done := make(chan struct{})
	go func() { active.Wait(); close(done) }()
	t := time.NewTimer(w.opts.StopWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		w.log.Warn("tether worker: agents did not return after their context ended; leaving them", "waited", w.opts.StopWait)
	}
	return err
}

// claimed is the server's answer to a claim.
type claimed struct {
	Run      tether.Run       `json:"run"`
	Messages []tether.Message `json:"messages"`
	Lease    struct {
		Token string `json:"token"`
		TTLms int64  `json:"ttl_ms"`
	} `json:"lease"`
	Offset tether.Offset `json:"offset"`
	// State is the thread's state as of the claim, absent while null.
	State json.RawMessage `json:"state,omitempty"`
	at    time.Time       // when the answer came
}

func (w *Worker) claimLoop(ctx context.Context, sem chan struct{}, start func(*claimed)) error {
	for attempt := 0; ; {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		cl, err := w.claim(ctx)
		if cl != nil {
			attempt = 0
			start(cl)
			continue
		}
		<-sem
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			attempt = 0
			continue
		}
		switch tether.CodeOf(err) {
		case tether.CodeBadRequest, tether.CodeUnauthorized, tether.CodeForbidden:
			w.log.Error("tether worker: the server refused the claim; stopping", "err", err)
			return err
		}
		// A 429 or 503 says when to come back (Retry-After): not sooner,
		// up to MaxBackoff.
		var wait time.Duration
		if te := (*tether.Error)(nil); errors.As(err, &te) {
			wait = te.RetryAfter
		}
		d := max(w.c.backoff(attempt), min(wait, w.c.max))
		attempt++
		w.log.Warn("tether worker: claim failed; retrying", "err", err, "delay", d)
		if sleep(ctx, d) != nil {
			return nil
		}
	}
}

// claim makes one claim. It returns nil, nil when no run came.
func (w *Worker) claim(ctx context.Context) (*claimed, error) {
	body, err := json.Marshal(struct {
		WorkerID  string   `json:"worker_id"`
		Agents    []string `json:"agents"`
		WaitMs    int64    `json:"wait_ms"`
		Resumable bool     `json:"resumable,omitempty"`
	}{w.opts.ID, w.names, w.opts.ClaimWait.Milliseconds(), w.opts.Resumable})
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	// The server holds a claim up to ClaimWait; past that and a margin,
	// the connection is as good as dead.
	a, err := w.c.post(ctx, "/v1/workers/claim", body, nil, w.opts.ClaimWait+30*time.Second)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	if a.status == http.StatusNoContent {
		return nil, nil
	}
	cl := &claimed{at: time.Now()}
	if err := json.Unmarshal(a.body, cl); err != nil || cl.Run.ID == "" || cl.Lease.Token == "" {
		return nil, tether.Errorf(CodeProtocol, "claim: the answer is not a claimed run")
	}
	return cl, nil
}

// execute runs one claimed run to its end, like the in-process runner.
func (w *Worker) execute(runs, hard context.Context, cl *claimed) {
	run := cl.Run
	log := w.log.With("run", run.ID, "thread", run.ThreadID, "agent", run.Agent, "attempt", run.Attempt)
	ctx, stop := context.WithCancelCause(runs)
	defer stop(errAgentReturned)

	ttl := time.Duration(cl.Lease.TTLms) * time.Millisecond
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	t := &runTransport{
		c: w.c, log: log, run: run, token: cl.Lease.Token, ttl: ttl, stop: stop, offset: cl.Offset,
		producer: w.opts.ID, epoch: int64(max(run.Attempt-1, 0)), lease: agents.NewLeaseClock(cl.at),
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); t.follow(ctx) }()
	go func() { defer wg.Done(); t.heartbeat(ctx) }()

	s := agents.NewSession(run, cl.Messages, t)
	s.State = cl.State
	err := agents.Call(ctx, w.opts.Agents[run.Agent], s)

	fctx, fcancel := context.WithCancel(hard)
	var ferr error
	switch cause := context.Cause(ctx); {
	case s.Finished():
		// The agent sent run.finished; if that append's outcome is not
		// known (its context ended in flight), send it again.
		ferr = t.flush(fctx)
		if agents.Refused(ferr) {
			// It never landed and the run is still open: a cancel came
			// before it (done and error are then refused), or its batch
			// was bad. End the run as Conclude does, or it waits out the
			// cancel grace or its lease.
			ferr = agents.NewSession(run, nil, t).Conclude(fctx, cmp.Or(err, ferr), errors.Is(cause, errCancelRequested))
		}
	case cause != nil && !errors.Is(cause, errCancelRequested):
		// The run ended without us, the lease is lost, or the worker is
		// stopping: the server ends the run (or hands it over).
		log.Info("tether worker: run left to the server", "why", cause, "agent_err", err)
	default:
		if err != nil && cause == nil {
			log.Warn("tether worker: agent failed", "err", err)
		}
		ferr = s.Conclude(fctx, err, cause != nil)
	}
	fcancel()
	if ferr != nil && tether.CodeOf(ferr) != tether.CodeConflict {
		log.Warn("tether worker: finish run", "err", ferr)
	}
	stop(errAgentReturned)
	wg.Wait()
}
