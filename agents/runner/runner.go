// Package runner runs agents in-process: it claims runs from the engine for
// the agents it holds, gives each a Session over the engine, keeps its
// lease alive, and delivers input and cancel requests to it.
//
// Runs held here carry the node's ID in their lease; when the node restarts,
// the engine aborts them (server_restart). Shutdown gives running agents a
// grace, then aborts what is left (server_shutdown).
//
// # Caveats
//
// The runner follows each run through a subscription of the engine, the same
// way a remote worker follows it over HTTP, so an in-process agent sees
// input and cancel requests only once they are committed.
//
// A run's appends are a producer's, as a worker's are (transport.go): an
// append the store could not take (unavailable) is sent again until it
// lands, once, while the lease lasts. Meanwhile the agent's Emit does not
// return: a store outage holds its run up, and one longer than the lease
// stops it.
package runner

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/engine"
)

// Options configure a Runner.
type Options struct {
	// Concurrency is how many runs may execute at once; later runs stay
	// pending, in line (engine.QueuePosition), until one ends. Defaults to
	// DefaultConcurrency.
	Concurrency int
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// DefaultConcurrency is the default Options.Concurrency: enough for a
// thousand runs that mostly wait (on a model's stream, or the demo agent's
// pauses) on a small machine. A run held here costs little by itself
// (a few goroutines and its session, ~100 KB with its subscription:
// docs/benchmarks.md); what it costs beyond that is its agent's.
const DefaultConcurrency = 1000

// Runner executes runs of in-process agents.
type Runner struct {
	e      *engine.Engine
	agents map[string]agents.Agent
	names  []string
	opts   Options
	log    *slog.Logger

	ctx    context.Context // ends when claiming stops
	stop   context.CancelFunc
	runCtx context.Context // ends when running agents must stop
	kill   context.CancelFunc
	loop   sync.WaitGroup
	active sync.WaitGroup

	claimLogged atomic.Int64 // when a failed claim was last logged as an error, Unix ns
}

// New returns a runner for the given agents, by name.
func New(e *engine.Engine, as map[string]agents.Agent, opts Options) *Runner {
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	r := &Runner{e: e, agents: as, opts: opts, log: opts.Logger}
	for n := range as {
		r.names = append(r.names, n)
	}
	sort.Strings(r.names)
	r.ctx, r.stop = context.WithCancel(context.Background())
	r.runCtx, r.kill = context.WithCancel(context.Background())
	return r
}

// Names returns the agent names, sorted.
func (r *Runner) Names() []string { return r.names }

// Start starts claiming runs.
func (r *Runner) Start() {
	if len(r.names) == 0 {
		return
	}
	// Each claim waits for its commit. One claimer would start a burst
	// of runs one commit at a time, and a commit takes longer the busier
	// the store's writer is, which is when bursts come: several claim
	// at once, and their commits share the writer's transactions.
	sem := make(chan struct{}, r.opts.Concurrency)
	for range min(r.opts.Concurrency, claimers) {
		r.loop.Add(1)
		go r.claimLoop(sem)
	}
}

// claimers is how many claims the runner has in flight at most.
const claimers = 8

// claimErrorLevel is the level of a failed claim's log line: error for the
// first in a second, debug for the others. A store outage fails every
// claimer alike, which one line tells; a single failure, whichever
// claimer it befalls, is still told.
func (r *Runner) claimErrorLevel() slog.Level {
	now := time.Now().UnixNano()
	last := r.claimLogged.Load()
	if now-last >= int64(time.Second) && r.claimLogged.CompareAndSwap(last, now) {
		return slog.LevelError
	}
	return slog.LevelDebug
}

// Shutdown stops claiming, waits for running agents until ctx ends, then
// cancels the rest and aborts their runs (server_shutdown).
func (r *Runner) Shutdown(ctx context.Context) error {
	r.stop()
	r.loop.Wait()
	done := make(chan struct{})
	go func() { r.active.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	actx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := r.e.AbortLocal(actx, engine.ReasonServerShutdown)
	r.kill()
	// An agent that ignores its context must not hold the process: its run
	// is already finished, so whatever it does next is refused.
	select {
	case <-done:
	case <-time.After(stopWait):
		r.log.Warn("in-process agents did not stop after their context ended; leaving them", "waited", stopWait)
	}
	return err
}

// stopWait is how long Shutdown waits for agents after cancelling them.
var stopWait = 5 * time.Second

// claimLoop claims runs and executes each in a goroutine of its own, until
// claiming stops. sem holds a slot for each run executing and each claim waiting, so that
// no more than Options.Concurrency runs execute at once.
func (r *Runner) claimLoop(sem chan struct{}) {
	defer r.loop.Done()
	worker := "inproc@" + r.e.NodeID()
	pause := time.Duration(0)
	for {
		select {
		case sem <- struct{}{}:
		case <-r.ctx.Done():
			return
		}
		// Stopping ends the wait, not a claim being committed: a run
		// claimed as the runner stops is still one of its runs, ended by
		// the shutdown like the others.
		c, err := r.e.Claim(context.WithoutCancel(r.ctx), engine.ClaimRequest{WorkerID: worker, Agents: r.names,
			Wait: 30 * time.Second, Local: true, Stop: r.ctx.Done()})
		if err != nil || c == nil {
			<-sem
			if r.ctx.Err() != nil {
				return
			}
			if err != nil {
				if errors.Is(err, engine.ErrClosed) {
					return
				}
				// The store may be unavailable for a while (a JetStream
				// cluster without quorum): keep trying, less often, so
				// that runs start again once it is back.
				pause = nextPause(pause)
				r.log.Log(r.ctx, r.claimErrorLevel(), "claim", "err", err, "retry_in", pause)
				if !sleep(r.ctx, pause) {
					return
				}
			}
			continue
		}
		pause = 0
		r.active.Add(1)
		go func() {
			defer func() { <-sem; r.active.Done() }()
			r.execute(c)
		}()
	}
}

// Pauses after a failed claim, or a failed subscription to or finish of
// a run held: the first, and the most they grow to.
const (
	claimPause    = 100 * time.Millisecond
	maxClaimPause = 5 * time.Second
)

// nextPause is the pause after a failure that followed a pause of
// pause (0 for none): claimPause, doubling up to maxClaimPause.
func nextPause(pause time.Duration) time.Duration {
	return min(max(2*pause, claimPause), maxClaimPause)
}

// sleep waits d, or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// execute runs one claimed run to its end.
func (r *Runner) execute(c *engine.Claim) {
	run := c.Run
	log := r.log.With("run", run.ID, "thread", run.ThreadID, "agent", run.Agent)
	ctx, cancel := context.WithCancelCause(r.runCtx)
	defer cancel(nil)

	tr := newTransport(r.e, c, log, cancel)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); tr.follow(ctx, c.Offset) }()
	go func() { defer wg.Done(); tr.heartbeat(ctx, r.e.LeaseTTL()/3) }()

	s := agents.NewSession(run, c.Messages, tr)
	s.State = c.State
	err := agents.Call(ctx, r.agents[run.Agent], s)
	cause := context.Cause(ctx)
	if err != nil && cause == nil {
		log.Warn("agent failed", "err", err)
	}
	// A run that ended without us (finished by the server, lease lost,
	// node shutting down) has nothing left to finish, but a run.finished
	// its agent sent whose outcome is unknown.
	if cancelled := errors.Is(cause, errCancelRequested); cause == nil || cancelled || s.Finished() {
		r.conclude(log, s, tr, err, cancelled)
	}
	cancel(errRunOver)
	wg.Wait()
}

// conclude finishes a run as its agent returned (agents.Session.Conclude),
// or makes sure of the run.finished the agent sent.
//
// The transport sends an append whose outcome is unknown again, with its
// sequence number, for as long as the lease lasts (its heartbeats go on
// meanwhile while the agent returned of itself), so a run.finished in
// doubt lands once or is refused. Refused, it never landed and the run is
// still open: a cancel came before it was sent again (done and error are
// then refused, and Conclude ends the run cancelled), or its batch was
// bad (it ends error), as the Go worker does; else the run would wait out
// the cancel grace or its lease. A run left open would wait for its lease
// to run out and end worker_lost, however its agent ended. Shutdown ends
// the tries, having ended the run.
func (r *Runner) conclude(log *slog.Logger, s *agents.Session, tr *transport, agentErr error, cancelled bool) {
	ctx := r.runCtx
	var err error
	if s.Finished() {
		err = tr.flush(ctx)
		if agents.Refused(err) {
			err = agents.NewSession(s.Run, nil, tr).Conclude(ctx, cmp.Or(agentErr, err), cancelled)
		}
	} else {
		err = s.Conclude(ctx, agentErr, cancelled)
	}
	if err != nil && tether.CodeOf(err) != tether.CodeConflict {
		log.Warn("finish run", "err", err)
	}
}

var (
	errCancelRequested = errors.New("cancel requested")
	errRunEnded        = errors.New("run ended")
	errLeaseLost       = tether.Errorf(tether.CodeLeaseLost, "the run's lease was lost")
	errRunOver         = errors.New("agent returned")
)
