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
package runner

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/hub"
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
	r.loop.Add(1)
	go r.claimLoop()
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

func (r *Runner) claimLoop() {
	defer r.loop.Done()
	sem := make(chan struct{}, r.opts.Concurrency)
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
				r.log.Error("claim", "err", err, "retry_in", pause)
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

	tr := &transport{e: r.e, runID: run.ID, token: c.Lease.Token, log: log}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); tr.follow(ctx, c.Offset, cancel) }()
	go func() { defer wg.Done(); tr.heartbeat(ctx, r.e.LeaseTTL()/3, cancel) }()

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
// A run.finished whose append failed without being refused (the store
// unavailable, a try that timed out) may or may not be in the log: it is
// sent again, less often, for as long as the lease lasts (its heartbeats
// go on meanwhile). A run left open would wait for its lease to run out
// and end worker_lost, however its agent ended. A try that was committed
// after all makes the next one conflict (nothing is taken after a
// run.finished, and an append is all or nothing), which ends the
// retries: the run has its one run.finished. So does a status the run
// may no longer end with (a cancel came meanwhile: the server ends it
// cancelled), and Shutdown, having ended the run.
func (r *Runner) conclude(log *slog.Logger, s *agents.Session, tr *transport, agentErr error, cancelled bool) {
	ctx, cancel := context.WithTimeout(r.runCtx, r.e.LeaseTTL())
	defer cancel()
	pause := time.Duration(0)
	for {
		tctx, tcancel := context.WithTimeout(ctx, finishTimeout)
		var err error
		if s.Finished() {
			err = tr.resend(tctx)
			if agents.Refused(err) {
				// It never landed and the run is still open: a cancel
				// came before it was sent again (done and error are then
				// refused: Conclude ends it cancelled), or its batch was
				// bad (it ends error). As the Go worker does; else the
				// run waits out the cancel grace or its lease.
				err = agents.NewSession(s.Run, nil, tr).Conclude(tctx, cmp.Or(agentErr, err), cancelled)
			}
		} else {
			err = s.Conclude(tctx, agentErr, cancelled)
		}
		tcancel()
		code := tether.CodeOf(err)
		if err == nil || code == tether.CodeConflict {
			return
		}
		again := code == tether.CodeUnavailable && !errors.Is(err, engine.ErrClosed) ||
			errors.Is(err, context.DeadlineExceeded)
		if !again || ctx.Err() != nil {
			log.Warn("finish run", "err", err)
			return
		}
		pause = nextPause(pause)
		log.Warn("finish run", "err", err, "retry_in", pause)
		if !sleep(ctx, pause) {
			log.Warn("finish run: gave up", "err", err)
			return
		}
	}
}

// finishTimeout bounds one try to finish a run.
const finishTimeout = 10 * time.Second

var (
	errCancelRequested = errors.New("cancel requested")
	errRunEnded        = errors.New("run ended")
	errLeaseLost       = errors.New("lease lost")
	errRunOver         = errors.New("agent returned")
)

// transport is a Session's way to the engine for an in-process run.
type transport struct {
	e     *engine.Engine
	runID string
	token string
	log   *slog.Logger

	answers agents.Answers

	mu sync.Mutex
	// unsure is the last append that held run.finished, while its
	// outcome is unknown (it failed, but was not refused): resend sends
	// it again.
	unsure []*tether.Event
}

func (t *transport) Append(ctx context.Context, evs []*tether.Event) (bool, error) {
	var sent []*tether.Event // evs as given: the engine sets fields of what it appends
	finishes := slices.ContainsFunc(evs, func(ev *tether.Event) bool { return ev.Type == tether.EventRunFinished })
	if finishes {
		sent = make([]*tether.Event, len(evs))
		for i, ev := range evs {
			c := *ev
			sent[i] = &c
		}
	}
	res, err := t.e.Append(ctx, t.runID, t.token, evs)
	if finishes {
		t.mu.Lock()
		switch {
		case agents.Refused(err):
			// Not in the log, and the session knows the run is still
			// open.
		case err != nil:
			t.unsure = sent
		default:
			t.unsure = nil
		}
		t.mu.Unlock()
	}
	if err != nil {
		return false, err
	}
	return res.CancelRequested, nil
}

// resend sends again the append that finished the run if its outcome is
// unknown.
func (t *transport) resend(ctx context.Context) error {
	t.mu.Lock()
	evs := t.unsure
	t.mu.Unlock()
	if evs == nil {
		return nil
	}
	_, err := t.Append(ctx, evs)
	return err
}

func (t *transport) WaitInput(ctx context.Context, requestID string) (json.RawMessage, error) {
	return t.answers.Wait(ctx, requestID)
}

// follow reads the run's events after offset after: input goes to
// WaitInput, a cancel request or the end of the run stops the agent.
//
// The agent runs while this follows, and nothing it follows is missed
// for a pause: a subscription that cannot start (the store unavailable
// for a moment) or breaks is made again from the last event read, at
// once if it was cut as too slow (an agent that emits faster than this
// reads), else after a pause that grows. Only the end of the run, of its
// thread or of the engine stops the agent from here: a run stopped
// otherwise would stay open, its runner gone, until its lease ran out.
func (t *transport) follow(ctx context.Context, after tether.Offset, stop context.CancelCauseFunc) {
	var sub *engine.Subscription
	defer func() {
		if sub != nil {
			sub.Close()
		}
	}()
	pause := time.Duration(0)
	for ctx.Err() == nil {
		if sub == nil {
			var err error
			sub, err = t.e.Subscribe(ctx, engine.SubscribeRequest{RunID: t.runID, Cursor: after})
			if err != nil {
				sub = nil
				if ctx.Err() != nil {
					return
				}
				if runGone(err) {
					stop(errRunEnded)
					return
				}
				pause = nextPause(pause)
				t.log.Warn("follow run", "err", err, "retry_in", pause)
				sleep(ctx, pause)
				continue
			}
		}
		recs, err := sub.Next(ctx)
		if err != nil {
			sub.Close()
			sub = nil
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, hub.ErrSlow):
				continue
			case runGone(err):
				stop(errRunEnded)
				return
			}
			pause = nextPause(pause)
			t.log.Warn("follow run", "err", err, "retry_in", pause)
			sleep(ctx, pause)
			continue
		}
		pause = 0
		if len(recs) > 0 {
			after = recs[len(recs)-1].Offset
		}
		for _, rec := range recs {
			switch rec.Type {
			case tether.EventRunCancelRequested:
				stop(errCancelRequested)
			case tether.EventRunFinished:
				stop(errRunEnded)
			case tether.EventRunInput:
				ev, err := rec.Decode()
				if err != nil {
					continue
				}
				t.answers.Put(ev.RequestID, ev.Value)
			}
		}
	}
}

// runGone reports whether a follower's error means there is no run left
// to follow: it ended (io.EOF), its thread was deleted (hub.ErrClosed,
// not_found) or the engine is closing (whose shutdown ends the run).
func runGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, hub.ErrClosed) || errors.Is(err, engine.ErrClosed) ||
		tether.CodeOf(err) == tether.CodeNotFound
}

// heartbeat keeps the lease alive while the agent runs.
func (t *transport) heartbeat(ctx context.Context, every time.Duration, stop context.CancelCauseFunc) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			_, err := t.e.Heartbeat(ctx, t.runID, engine.Holder{Token: t.token})
			switch tether.CodeOf(err) {
			case tether.CodeLeaseLost, tether.CodeConflict, tether.CodeNotFound:
				stop(errLeaseLost)
				return
			}
		}
	}
}
