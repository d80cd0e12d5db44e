package engine

import (
	"context"
	"errors"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// Reasons the server gives when it ends a run (the code of the run's error).
const (
	ReasonServerRestart  = "server_restart"
	ReasonServerShutdown = "server_shutdown"
	ReasonWorkerLost     = "worker_lost"
)

var reasonMessages = map[string]string{
	ReasonServerRestart:  "The run stopped because the server restarted.",
	ReasonServerShutdown: "The run stopped because the server shut down.",
	ReasonWorkerLost:     "The run stopped because its worker was lost.",
}

// recover finishes what a previous process of this node left behind.
//
// A run whose thread cannot be loaded (a damaged row: an internal error)
// is logged at error level and counted (Counters.RecoveryErrors), and the
// others are recovered: one thread must not keep the node from serving
// every other. Requests for that thread get internal errors until it is
// repaired. A store that cannot be reached, or ctx ending, still fails
// the start: then no run could be recovered.
func (e *Engine) recover(ctx context.Context) error {
	rows, err := e.st.ActiveRuns(ctx)
	if err != nil {
		return e.storeErr(err, "runs")
	}
	now := e.opts.Now()
	for _, rr := range rows {
		switch {
		case rr.Run.Status.Active() && rr.Lease.Node == e.opts.NodeID:
			err = e.abort(ctx, rr.Run.ID, ReasonServerRestart, nil)
		case rr.Run.Status.Active() && !rr.Lease.ExpiresAt.IsZero() && now.After(rr.Lease.ExpiresAt):
			err = e.expired(ctx, rr, now)
		case rr.Run.Status == tether.RunPending:
			err = e.requeue(ctx, rr.Run.ThreadID)
		}
		switch {
		case err == nil || tether.CodeOf(err) == tether.CodeNotFound:
		case tether.CodeOf(err) == tether.CodeInternal && ctx.Err() == nil &&
			!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
			e.counters.RecoveryErrors.Add(1)
			e.log.Error("recovery skipped a run: its thread cannot be loaded", "thread", rr.Run.ThreadID,
				"run", rr.Run.ID, "status", rr.Run.Status, "err", err)
		default:
			return err
		}
	}
	return nil
}

// requeue queues the next pending run of a thread if it is ready.
func (e *Engine) requeue(ctx context.Context, threadID string) error {
	t, err := e.thread(ctx, threadID)
	if err != nil {
		return err
	}
	t.rmu.Lock()
	r, ok := t.state.Machine().NextPending()
	t.rmu.Unlock()
	if ok {
		e.queue.push(r.Agent, r.ID, r.ThreadID)
	}
	return nil
}

// abort ends a run aborted with a reason, in one append that also aborts
// its running messages; a run with a cancel request pending ends
// cancelled instead (protocol.md, "The server ends a run itself"). check,
// if set, must still hold under the thread's lock (the sweeper uses it to
// re-check that the lease is still expired).
func (e *Engine) abort(ctx context.Context, runID, reason string, check func(p *planner) bool) error {
	t, err := e.threadOfRun(ctx, runID)
	if err != nil {
		return err
	}
	info, _ := jsonMarshal(tether.ErrorInfo{Code: reason, Message: reasonMessages[reason]})
	// How the run ended, as the plan that was committed says: a plan may
	// be validated again (another node wrote first) or its commit fail
	// (a full disk, and the sweeper tries again at its next pass), so it
	// is counted and logged once its commit holds, not when planned.
	var ended tether.RunStatus
	_, err = e.update(ctx, t, func(p *planner) error {
		ended = ""
		r, ok := p.run(runID)
		if !ok || r.Status.Terminal() || (check != nil && !check(p)) {
			return nil
		}
		// A client asked for the run to end and it did: it ends as the
		// cancel grace would have ended it, whoever stopped it first.
		if !r.CancelRequestedAt.IsZero() {
			ended = tether.RunCancelled
			return p.emit(&tether.Event{Type: tether.EventRunFinished, RunID: runID, Status: string(tether.RunCancelled)})
		}
		ended = tether.RunAborted
		return p.emit(&tether.Event{Type: tether.EventRunFinished, RunID: runID, Status: string(tether.RunAborted), Error: info})
	})
	switch {
	case err != nil:
	case ended == tether.RunCancelled:
		e.log.Info("run cancelled", "run", runID, "thread", t.id, "reason", reason)
	case ended == tether.RunAborted:
		e.counters.Aborted.Add(1)
		e.log.Info("run aborted", "run", runID, "thread", t.id, "reason", reason)
	}
	return err
}

// expired handles a run whose lease expired: a resumable one waits for
// another worker to reclaim it, within the resume window; any other is
// aborted (worker_lost). The abort re-checks the lease under the thread's
// lock, and its commit holds only if the store still has that lease: a
// heartbeat or a reclaim that lands first wins, on whichever node (a
// renewal through another node writes no event, so this node's copy of
// the lease, and the rows the sweep read, may not show it).
func (e *Engine) expired(ctx context.Context, rr *store.RunRecord, now time.Time) error {
	id := rr.Run.ID
	if rr.Lease.Resumable && now.Sub(rr.Lease.ExpiresAt) < e.opts.ResumeWindow {
		e.queue.pushReclaim(rr.Run.Agent, id, rr.Run.ThreadID)
		return nil
	}
	return e.abort(ctx, id, ReasonWorkerLost, func(p *planner) bool {
		l := p.lease(id)
		if l.ExpiresAt.IsZero() || p.now.Before(l.ExpiresAt) {
			return false
		}
		if l.Resumable && p.now.Sub(l.ExpiresAt) < e.opts.ResumeWindow {
			return false
		}
		p.actsOnLease(id, l)
		return true
	})
}

// AbortLocal aborts every active run this node's in-process agents hold
// (at shutdown, after their grace).
func (e *Engine) AbortLocal(ctx context.Context, reason string) error {
	rows, err := e.st.ActiveRuns(ctx)
	if err != nil {
		return e.storeErr(err, "runs")
	}
	for _, rr := range rows {
		if rr.Run.Status.Active() && rr.Lease.Node == e.opts.NodeID {
			if err := e.abort(ctx, rr.Run.ID, reason, nil); err != nil && tether.CodeOf(err) != tether.CodeNotFound {
				return err
			}
		}
	}
	return nil
}

func (e *Engine) sweepLoop() {
	defer e.bg.Done()
	tick := time.NewTicker(e.opts.SweepInterval)
	defer tick.Stop()
	for {
		select {
		case <-e.closing:
			return
		case <-tick.C:
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := e.sweep(ctx); err != nil && tether.CodeOf(err) != tether.CodeUnavailable {
				e.log.Error("sweep", "err", err)
			}
			cancel()
		}
	}
}

// sweep ends runs whose lease expired (aborted, worker_lost) and runs whose
// cancel grace ran out (cancelled). Each decision is checked again under
// the thread's lock, so a heartbeat that lands first wins.
func (e *Engine) sweep(ctx context.Context) error {
	rows, err := e.st.ActiveRuns(ctx)
	if err != nil {
		return e.storeErr(err, "runs")
	}
	for _, rr := range rows {
		if err := e.sweepRun(ctx, rr); err != nil && tether.CodeOf(err) != tether.CodeNotFound {
			return err
		}
	}
	return nil
}

func (e *Engine) sweepRun(ctx context.Context, rr *store.RunRecord) error {
	now := e.opts.Now()
	id := rr.Run.ID
	graceOver := !rr.Run.CancelRequestedAt.IsZero() && now.Sub(rr.Run.CancelRequestedAt.Time) >= e.opts.CancelGrace
	// A lost resumable worker's run waits for a reclaim, but not once its
	// cancel grace ran out: nobody is left to confirm the cancel, and the
	// client asked for the run to end, cancelled.
	if rr.Run.Status.Active() && !rr.Lease.ExpiresAt.IsZero() && now.After(rr.Lease.ExpiresAt) && !(graceOver && rr.Lease.Resumable) {
		return e.expired(ctx, rr, now)
	}
	if graceOver {
		t, err := e.threadOfRun(ctx, id)
		if err != nil {
			return err
		}
		_, err = e.update(ctx, t, func(p *planner) error {
			r, ok := p.run(id)
			if !ok || r.Status.Terminal() || r.CancelRequestedAt.IsZero() || p.now.Sub(r.CancelRequestedAt.Time) < e.opts.CancelGrace {
				return nil
			}
			return p.emit(&tether.Event{Type: tether.EventRunFinished, RunID: id, Status: string(tether.RunCancelled)})
		})
		return err
	}
	return nil
}
