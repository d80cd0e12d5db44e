package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/hub"
)

// transport is a Session's way to the engine for an in-process run: its
// appends, its heartbeats and its input.
//
// Its appends are a producer's (engine.ProducerAppend), as a worker's
// over HTTP are (protocol.md §6): the run's worker ID as Producer-Id, its
// attempt as epoch, one sequence number per append. An append whose
// outcome is unknown (the store unavailable: a JetStream leader election,
// an acknowledgement that timed out; a try that timed out) is sent again
// with its number until the engine answers, for as long as the lease
// lasts: it lands once, and before any later append. So a short store
// outage holds the agent up instead of failing its run.
type transport struct {
	e     *engine.Engine
	runID string
	token string
	ttl   time.Duration
	log   *slog.Logger
	stop  context.CancelCauseFunc // ends the agent's context

	answers agents.Answers

	lease *agents.LeaseClock // the last append or heartbeat that renewed the lease

	amu      sync.Mutex      // one append at a time, in order
	producer engine.Producer // with the number of the next append
	// pending is an append whose outcome is unknown: it is sent again,
	// with its number, before the next.
	pending []*tether.Event
}

var _ agents.Transport = (*transport)(nil)

// newTransport returns the transport of a claimed run; stop ends its
// agent's context.
func newTransport(e *engine.Engine, c *engine.Claim, log *slog.Logger, stop context.CancelCauseFunc) *transport {
	return &transport{e: e, runID: c.Run.ID, token: c.Lease.Token, ttl: e.LeaseTTL(), log: log, stop: stop,
		lease:    agents.NewLeaseClock(time.Now()),
		producer: engine.Producer{ID: c.Run.WorkerID, Epoch: int64(c.Run.Attempt)}}
}

// Append appends events under the lease, with the next sequence number
// (see transport). An error that wraps agents.ErrNotSent says none of
// them is in the log: they were never sent (ctx had ended), or an
// earlier append whose outcome is still unknown holds them back.
func (t *transport) Append(ctx context.Context, evs []*tether.Event) (bool, error) {
	t.amu.Lock()
	defer t.amu.Unlock()
	if t.pending != nil {
		if _, err := t.send(ctx, t.pending); err != nil && t.pending != nil {
			return false, fmt.Errorf("%w (%w)", err, agents.ErrNotSent)
		}
	}
	return t.send(ctx, copyEvents(evs))
}

// flush sends the append whose outcome is unknown, if there is one.
func (t *transport) flush(ctx context.Context) error {
	t.amu.Lock()
	defer t.amu.Unlock()
	if t.pending == nil {
		return nil
	}
	_, err := t.send(ctx, t.pending)
	return err
}

// send appends evs under the current sequence number, again after each
// failure that leaves its outcome unknown, with pauses that grow. It
// stops when ctx ends, and when the lease has certainly expired: two
// TTLs after the last append or heartbeat that renewed it was sent (one
// TTL is the lease; the second covers renewals whose outcome was
// unknown, which the engine can only have made while the lease held). It
// then ends the agent's context. t.amu is held.
func (t *transport) send(ctx context.Context, evs []*tether.Event) (cancelRequested bool, err error) {
	if ctx.Err() != nil {
		return false, fmt.Errorf("append: %w (%w)", context.Cause(ctx), agents.ErrNotSent)
	}
	p := t.producer
	pause := time.Duration(0)
	for {
		sent := time.Now()
		tctx, cancel := context.WithTimeout(ctx, appendTimeout)
		// A copy for each try: the engine sets fields of what it appends,
		// and a try that timed out may still be committed.
		res, err := t.e.ProducerAppend(tctx, t.runID, engine.Holder{Token: t.token}, &p, copyEvents(evs))
		cancel()
		switch {
		case err == nil:
			t.pending = nil
			t.producer.Seq++
			if !res.Duplicate { // a duplicate renews nothing
				t.lease.Renew(sent)
			}
			return res.CancelRequested, nil
		case ctx.Err() != nil:
			t.pending = evs
			return false, fmt.Errorf("append: %w", context.Cause(ctx))
		case errors.Is(err, engine.ErrClosed):
			// The node is stopping, and its shutdown ends the run: not
			// sent again now, but not known to be refused either.
			t.pending = evs
			return false, err
		case !inDoubt(err):
			// Refused: nothing was appended, and the number is free.
			t.pending = nil
			return false, err
		}
		t.pending = evs
		if t.lease.Expired(t.ttl) {
			t.stop(errLeaseLost)
			return false, tether.Wrap(err, tether.CodeLeaseLost, "the lease expired while the store could not take the run's events")
		}
		pause = nextPause(pause)
		t.log.Warn("append", "err", err, "seq", p.Seq, "retry_in", pause)
		if !sleep(ctx, pause) {
			return false, fmt.Errorf("append: %w", context.Cause(ctx))
		}
	}
}

// appendTimeout bounds one try of an append.
const appendTimeout = 10 * time.Second

// inDoubt reports whether an append's error leaves its outcome unknown,
// so that it is sent again: the store could not say (unavailable), or the
// try timed out.
func inDoubt(err error) bool {
	return tether.CodeOf(err) == tether.CodeUnavailable || errors.Is(err, context.DeadlineExceeded)
}

// copyEvents returns copies of evs.
func copyEvents(evs []*tether.Event) []*tether.Event {
	out := make([]*tether.Event, len(evs))
	for i, ev := range evs {
		c := *ev
		out[i] = &c
	}
	return out
}

func (t *transport) WaitInput(ctx context.Context, requestID string) (json.RawMessage, error) {
	return t.answers.Wait(ctx, requestID)
}

// heartbeat keeps the lease alive while the agent runs, also while an
// append waits for the store to take it.
func (t *transport) heartbeat(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			sent := time.Now()
			_, err := t.e.Heartbeat(ctx, t.runID, engine.Holder{Token: t.token})
			switch tether.CodeOf(err) {
			case tether.CodeLeaseLost, tether.CodeConflict, tether.CodeNotFound:
				t.stop(errLeaseLost)
				return
			}
			if err == nil {
				t.lease.Renew(sent)
			}
		}
	}
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
func (t *transport) follow(ctx context.Context, after tether.Offset) {
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
					t.stop(errRunEnded)
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
				t.stop(errRunEnded)
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
				t.stop(errCancelRequested)
			case tether.EventRunFinished:
				t.stop(errRunEnded)
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
