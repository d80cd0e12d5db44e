package engine

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
	"github.com/tetherhq/tether/runs"
	"github.com/tetherhq/tether/store"
)

// ClaimRequest asks for a run to work on.
type ClaimRequest struct {
	// WorkerID names the worker (for logs and the run's worker_id).
	WorkerID string
	// Agents are the agent names the worker can run.
	Agents []string
	// Wait is how long to wait for a run when none is ready.
	Wait time.Duration
	// Stop, if set, ends the wait when it is closed (the server is
	// stopping). Unlike the end of the claim's context, it does not give
	// up a claim already being committed: that one is returned.
	Stop <-chan struct{}
	// Local marks an in-process agent of this node: its runs are aborted
	// when the node restarts, whatever their lease says.
	Local bool
	// Resumable says the worker's agents can resume a run from its log.
	// If such a worker is lost, its runs are not aborted: they wait (up to
	// Options.ResumeWindow) for another worker to reclaim them, keeping
	// their status, so a waiting run still waits on its request. A worker
	// gets reclaimed runs with an attempt above 1.
	Resumable bool
	// KeyID names the API key the worker claims with (see store.Lease);
	// the lease is bound to it. Empty without one.
	KeyID string
}

// Claim is a run handed to a worker, with the lease it appends under.
type Claim struct {
	Run tether.Run
	// Messages are the thread's messages as of the claim, but the
	// answers runs replace (tether.Conversation: a regenerate's run does
	// not see the answer it makes again): the conversation the agent
	// answers.
	Messages []tether.Message
	// State is the thread's state as of the claim, nil while null.
	State json.RawMessage
	Lease LeaseInfo
	// Offset is the offset of the run.started event: a subscription to the
	// run from here sees input and cancel requests that come later.
	Offset tether.Offset
}

// LeaseInfo is the wire form of a lease.
type LeaseInfo struct {
	Token     string      `json:"token"`
	ExpiresAt tether.Time `json:"expires_at"`
	TTLms     int64       `json:"ttl_ms"`
}

// Claim takes the oldest run that is ready for one of the agents, waiting
// up to req.Wait for one. It returns nil, nil if none came. If ctx ends
// while the claim is being committed, the claim cannot reach its caller:
// the run is released to the next claim and Claim returns ctx.Err().
func (e *Engine) Claim(ctx context.Context, req ClaimRequest) (*Claim, error) {
	if len(req.Agents) == 0 {
		return nil, tether.Errorf(tether.CodeBadRequest, "agents must name at least one agent")
	}
	if req.WorkerID == "" || len(req.WorkerID) > 255 {
		return nil, tether.Errorf(tether.CodeBadRequest, "worker_id must be 1 to 255 bytes")
	}
	for _, a := range req.Agents {
		if a == "" || len(a) > 255 {
			return nil, tether.Errorf(tether.CodeBadRequest, "agent names must be 1 to 255 bytes")
		}
	}
	e.sawAgents(ctx, req.Agents)
	timer := time.NewTimer(req.Wait)
	defer timer.Stop()
	for {
		q, ok, wake := e.queue.pop(req.Agents)
		if ok {
			c, err := e.claim(ctx, q, req)
			if err != nil {
				// The run may not have been taken (the store failed, the
				// thread left memory meanwhile): keep it for the next
				// claim, or nothing would find it until a restart. An
				// entry that went stale meanwhile is skipped by then.
				e.queue.add(q)
			}
			if err != nil || c != nil {
				return c, err
			}
			continue // stale entry
		}
		if e.queue.isClosed() {
			return nil, errClosed
		}
		select {
		case <-wake:
		case <-timer.C:
			return nil, nil
		case <-req.Stop:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// claim starts a queued run if it is still the next one of its thread. It
// returns nil, nil if the entry went stale.
func (e *Engine) claim(ctx context.Context, q queuedRun, req ClaimRequest) (*Claim, error) {
	t, err := e.thread(ctx, q.threadID)
	if err != nil {
		if tether.CodeOf(err) == tether.CodeNotFound {
			return nil, nil
		}
		return nil, err
	}
	// Once the run is taken, its claim is seen through to the commit's
	// outcome whatever the caller does: a claim given up on mid-commit
	// would leave the run started under a lease nobody ever received.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimCommitTimeout)
	defer cancel()
	var lease store.Lease
	o, err := e.update(cctx, t, func(p *planner) error {
		next, ok := p.tx.NextPending()
		if q.reclaim {
			// A reclaim takes a started run whose lease expired.
			next, ok = p.run(q.runID)
			l := p.lease(q.runID)
			if !ok || !next.Status.Active() || !l.Resumable || p.now.Before(l.ExpiresAt) {
				return errStale
			}
			p.actsOnLease(q.runID, l)
		}
		if !ok || next.ID != q.runID {
			return errStale
		}
		lease = store.Lease{Token: newToken(), Owner: req.WorkerID, KeyID: req.KeyID, ExpiresAt: p.now.Add(e.opts.LeaseTTL), Resumable: req.Resumable}
		if req.Local {
			lease.Node = e.opts.NodeID
		}
		p.setLease(next.ID, lease)
		return p.emit(&tether.Event{Type: tether.EventRunStarted, RunID: next.ID, WorkerID: req.WorkerID, Attempt: next.Attempt + 1})
	})
	if err == errStale {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		// The caller went away while the claim was committed: nobody
		// holds the lease, so the run goes to the next claim at once.
		e.release(t, q, lease.Token)
		return nil, ctx.Err()
	}
	st := t.snapshotState()
	snap := st.Snapshot()
	run, _ := st.Machine().Run(q.runID)
	return &Claim{
		Run:      run,
		Messages: tether.Conversation(snap.Runs, snap.Messages),
		State:    snap.State,
		Lease:    LeaseInfo{Token: lease.Token, ExpiresAt: tether.At(lease.ExpiresAt), TTLms: e.opts.LeaseTTL.Milliseconds()},
		Offset:   o.records[len(o.records)-1].Offset,
	}, nil
}

var errStale = tether.Errorf(tether.CodeConflict, "stale queue entry")

// claimCommitTimeout bounds how long a claim waits for its commit once it
// no longer waits for its caller.
const claimCommitTimeout = 30 * time.Second

// release gives up a lease that was never handed to a worker (its claim's
// caller went away during the commit): the lease ends now and the run is
// queued to be reclaimed, as a lost resumable worker's run is, so the next
// claim for its agent takes it (run.started, attempt + 1). If nobody
// claims it within the resume window it ends aborted (worker_lost), as
// such runs do. If the release fails, the lease simply runs out.
func (e *Engine) release(t *thread, q queuedRun, token string) {
	ctx, cancel := context.WithTimeout(context.Background(), claimCommitTimeout)
	defer cancel()
	released := false
	_, err := e.update(ctx, t, func(p *planner) error {
		released = false
		r, ok := p.run(q.runID)
		l := p.lease(q.runID)
		if !ok || r.Status.Terminal() || l.Token != token {
			return nil
		}
		p.setLease(q.runID, store.Lease{Owner: l.Owner, ExpiresAt: p.now.Time, Resumable: true})
		released = true
		return nil
	})
	if err != nil {
		e.log.Warn("release an undelivered claim", "run", q.runID, "err", err)
		return
	}
	if released {
		e.log.Info("claim abandoned by its worker; run queued again", "run", q.runID, "thread", t.id)
		e.queue.pushReclaim(q.agent, q.runID, q.threadID)
	}
}

// AppendResult is what an append or a heartbeat returns to a worker.
type AppendResult struct {
	NextOffset      tether.Offset `json:"next_offset"`
	LeaseExpiresAt  tether.Time   `json:"lease_expires_at"`
	CancelRequested bool          `json:"cancel_requested"`
	// Duplicate is set when a producer's append was already in the log:
	// nothing was appended (HTTP 204).
	Duplicate bool `json:"-"`
	// Producer is the producer's state after the append, for the
	// Producer-Epoch and Producer-Seq response headers.
	Producer *Producer `json:"-"`
}

// Append appends a worker's events to its run under its lease, atomically:
// all are appended or none. It also renews the lease. Errors: not_found for
// an unknown run; conflict if the run is finished, or lease_lost if it was
// aborted because its lease expired; lease_lost if the token is not the
// run's current lease, it expired, or it was claimed with an API key
// (this call has none); bad_request or conflict for events the state
// machine or the worker rules (runs.WorkerRules) reject.
func (e *Engine) Append(ctx context.Context, runID, token string, evs []*tether.Event) (*AppendResult, error) {
	return e.ProducerAppend(ctx, runID, Holder{Token: token}, nil, evs)
}

// ProducerAppend is Append made idempotent by a producer (nil: none). An
// append whose sequence number the producer already used is a duplicate:
// it succeeds with Duplicate set and appends nothing, even if the run has
// finished since, because the events are in the log. A producer error is a
// *ProducerError.
func (e *Engine) ProducerAppend(ctx context.Context, runID string, h Holder, p *Producer, evs []*tether.Event) (*AppendResult, error) {
	if p != nil {
		if err := p.Check(); err != nil {
			return nil, err
		}
	}
	// An event a worker may not send is refused after the run and its
	// lease are checked, as every other fault of the events is
	// (protocol.md §6): refused carries it there.
	var refused error
	for i, ev := range evs {
		if err := runs.WorkerEvent(ev, runID); err != nil {
			refused = eventErr(i, ev, err)
			break
		}
		ev.RunID = runID
		if ev.Type == tether.EventMessageCreated && ev.Message != nil && ev.MessageID == "" {
			ev.MessageID = ev.Message.ID
		}
	}
	return e.leased(ctx, runID, h, p, evs, refused)
}

// RefuseAppend answers an append whose events could not be read at all
// (not JSON, not an array of events, an empty one) with refused, once the
// run, its lease and the producer passed their checks, as every other
// fault of the events is (protocol.md §6): a worker whose run is gone or
// whose lease is lost learns that first. Like ProducerAppend, a producer's
// duplicate succeeds with Duplicate set; else it returns refused.
func (e *Engine) RefuseAppend(ctx context.Context, runID string, h Holder, p *Producer, refused error) (*AppendResult, error) {
	if p != nil {
		if err := p.Check(); err != nil {
			return nil, err
		}
	}
	return e.leased(ctx, runID, h, p, nil, refused)
}

// Heartbeat renews a run's lease, with the errors of Append.
func (e *Engine) Heartbeat(ctx context.Context, runID string, h Holder) (*AppendResult, error) {
	return e.leased(ctx, runID, h, nil, nil, nil)
}

// leased appends evs under the run's lease (none: a heartbeat); refused,
// if set, is the answer once the run and the lease pass their checks.
func (e *Engine) leased(ctx context.Context, runID string, h Holder, prod *Producer, evs []*tether.Event, refused error) (*AppendResult, error) {
	var key string
	if prod != nil {
		key = producerKey(runID, prod.ID)
	}
	for reloads := 0; ; reloads++ {
		t, err := e.threadOfRun(ctx, runID)
		if err != nil {
			return nil, err
		}
		var loaded *store.Producer
		var gen int64
		if prod != nil {
			if loaded, gen, err = e.producerState(ctx, t, key); err != nil {
				return nil, err
			}
		}
		res, err := e.leasedOnce(ctx, t, runID, h, prod, key, loaded, gen, evs, refused)
		if err == errProducerReload && reloads < maxProducerReloads {
			continue
		}
		if err == errProducerReload {
			err = tether.Errorf(tether.CodeUnavailable, "the producer's state keeps changing; retry")
		}
		return res, err
	}
}

// leasedOnce is one attempt of leased, with the producer's state as loaded
// in generation gen of the thread's speculative state.
func (e *Engine) leasedOnce(ctx context.Context, t *thread, runID string, h Holder, prod *Producer, key string, loaded *store.Producer, gen int64, evs []*tether.Event, refused error) (*AppendResult, error) {
	var res AppendResult
	var inFlight *pending
	o, err := e.update(ctx, t, func(p *planner) error {
		inFlight = nil
		r, ok := p.tx.PeekRun(runID)
		if !ok {
			return tether.Errorf(tether.CodeNotFound, "run %s not found", clip.ID(runID))
		}
		if prod != nil {
			cur, ok := t.producers[key]
			if !ok {
				if t.gen != gen {
					return errProducerReload
				}
				cur = loaded
			}
			dup, next, err := checkProducer(cur, key, *prod)
			if err != nil {
				return err
			}
			res.Producer = &Producer{ID: prod.ID, Epoch: prod.Epoch, Seq: prod.Seq}
			if dup {
				if pd := t.prodPending[key]; pd != nil && !pd.isSettled() {
					// The state that makes this a duplicate is not
					// committed yet: its commit may still fail.
					inFlight = pd
				}
				res.Duplicate = true
				res.Producer.Epoch, res.Producer.Seq = cur.Epoch, cur.Seq
				return nil
			}
			p.producers = append(p.producers, *next)
		}
		if r.Status.Terminal() {
			if r.Error != nil && r.Error.Code == ReasonWorkerLost {
				return tether.Errorf(tether.CodeLeaseLost, "the lease on run %s expired and the run was aborted", runID)
			}
			return tether.Errorf(tether.CodeConflict, "run %s is finished (%s)", runID, r.Status)
		}
		l := p.lease(runID)
		if h.Token == "" || l.Token != h.Token {
			return tether.Errorf(tether.CodeLeaseLost, "the lease on run %s is not yours: it expired or another worker holds it", runID)
		}
		if err := h.check(runID, l); err != nil {
			return err
		}
		if !l.ExpiresAt.IsZero() && !p.now.Before(l.ExpiresAt) {
			return tether.Errorf(tether.CodeLeaseLost, "the lease on run %s expired", runID)
		}
		if refused != nil {
			return refused
		}
		if err := p.emitWorker(evs); err != nil {
			return err
		}
		// Renew the lease; write it only when it moved enough to matter,
		// so that a busy run does not rewrite its row on every append.
		renewed := h.bind(l)
		renewed.ExpiresAt = p.now.Add(e.opts.LeaseTTL)
		if renewed.ExpiresAt.Sub(l.ExpiresAt) > e.opts.LeaseTTL/10 || renewed.KeyID != l.KeyID {
			p.setLease(runID, renewed)
			l = renewed
		}
		r, _ = p.tx.PeekRun(runID)
		res.LeaseExpiresAt = tether.At(l.ExpiresAt)
		res.CancelRequested = !r.CancelRequestedAt.IsZero()
		return nil
	})
	if err != nil {
		return nil, err
	}
	if inFlight != nil {
		// Answer once the append this one repeats has its outcome: a
		// duplicate if it committed, else this one is checked again.
		select {
		case <-inFlight.settled:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return nil, errProducerReload
	}
	if n := len(o.records); n > 0 {
		res.NextOffset = o.records[n-1].Offset
	} else {
		t.rmu.Lock()
		res.NextOffset = t.state.Offset()
		t.rmu.Unlock()
	}
	return &res, nil
}

func newToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
