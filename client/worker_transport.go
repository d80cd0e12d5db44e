package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
)

// runTransport is a Session's way to the server for one claimed run: its
// appends, its heartbeats and its input.
type runTransport struct {
	c        *Client
	log      *slog.Logger
	run      tether.Run
	token    string
	ttl      time.Duration
	stop     context.CancelCauseFunc
	offset   tether.Offset // of run.started: where following the run starts
	producer string
	epoch    int64

	lease *agents.LeaseClock // the last answer that renewed the lease

	amu     sync.Mutex // one append at a time, in order
	seq     int64      // the Producer-Seq of the next append
	pending []byte     // an append that may have been committed: sent again (same seq) before the next

	answers agents.Answers
}

var _ agents.Transport = (*runTransport)(nil)

// Append appends events under the lease, with the next Producer-Seq, and
// retries (see leased) until the server answers. A batch whose outcome
// stays unknown (ctx ended after it may have reached the server) is sent
// again, with its sequence number, before the next: it lands at most once
// and before any later batch.
func (t *runTransport) Append(ctx context.Context, evs []*tether.Event) (bool, error) {
	body, err := json.Marshal(evs)
	if err != nil {
		return false, fmt.Errorf("append: encode the events: %w (%w)", err, agents.ErrNotSent)
	}
	t.amu.Lock()
	defer t.amu.Unlock()
	if t.pending != nil {
		if _, _, err := t.appendBatch(ctx, t.pending); err != nil && t.pending != nil {
			// Still in doubt, so this batch, which may not land before
			// it, is not sent.
			return false, fmt.Errorf("%w (%w)", err, agents.ErrNotSent)
		}
	}
	cancel, maybeSent, err := t.appendBatch(ctx, body)
	if err != nil && !maybeSent {
		// No try can have reached the server (ctx had ended before the
		// first, or every connection was refused): a run.finished in it
		// leaves the run open, for the worker to conclude.
		return false, fmt.Errorf("%w (%w)", err, agents.ErrNotSent)
	}
	return cancel, err
}

// flush sends the pending batch, if there is one.
func (t *runTransport) flush(ctx context.Context) error {
	t.amu.Lock()
	defer t.amu.Unlock()
	if t.pending == nil {
		return nil
	}
	_, _, err := t.appendBatch(ctx, t.pending)
	return err
}

// appendBatch sends one batch under the current sequence number. t.amu
// is held. maybeSent reports whether a try may have reached the server.
func (t *runTransport) appendBatch(ctx context.Context, body []byte) (cancel, maybeSent bool, err error) {
	hdr := http.Header{
		"Tether-Lease":   {t.token},
		"Producer-Id":    {t.producer},
		"Producer-Epoch": {strconv.FormatInt(t.epoch, 10)},
		"Producer-Seq":   {strconv.FormatInt(t.seq, 10)},
	}
	var a *answer
	a, maybeSent, err = t.leased(ctx, "/v1/runs/"+escape(t.run.ID)+"/events", body, hdr)
	switch {
	case err == nil:
		t.seq++
		t.pending = nil
		if a.status == http.StatusNoContent {
			return false, true, nil // committed by an earlier try whose answer was lost
		}
		return t.noteResult(a), true, nil
	case a != nil:
		// Refused for good: nothing was appended, the number is free.
		t.pending = nil
		t.refused(a, err)
		return false, true, fmt.Errorf("append: %w", err)
	}
	if maybeSent {
		t.pending = body
	}
	return false, maybeSent, fmt.Errorf("append: %w", err)
}

// noteResult reads an append or heartbeat answer; a cancel request ends
// the agent's context.
func (t *runTransport) noteResult(a *answer) bool {
	var res struct {
		CancelRequested bool `json:"cancel_requested"`
	}
	_ = json.Unmarshal(a.body, &res)
	if res.CancelRequested {
		t.stop(errCancelRequested)
	}
	return res.CancelRequested
}

// refused handles an answer that retrying cannot change: the lease or the
// run is gone, or the producer state is off. Other refusals (a bad or
// impossible event) are the agent's to handle.
func (t *runTransport) refused(a *answer, err error) {
	switch tether.CodeOf(err) {
	case tether.CodeNotFound:
		t.stop(errRunEnded)
	case tether.CodeLeaseLost, tether.CodeGone, tether.CodeUnauthorized, tether.CodeForbidden:
		t.stop(errLeaseLost)
	case tether.CodeConflict:
		if a.header.Get("Producer-Expected-Seq") != "" {
			// The server's sequence is not ours: it lost appends it had
			// acknowledged (a crash that lost committed data, like a power
			// loss without --fsync). The run's log has a hole that the
			// worker cannot fill.
			t.log.Error("tether worker: the server lost appends of this run", "expected_seq", a.header.Get("Producer-Expected-Seq"), "seq", t.seq)
			t.stop(errLeaseLost)
		}
	}
}

// leased sends a request made under the run's lease and retries it, with
// the same body and headers, after transport errors and 408, 429 and 5xx
// answers, with backoff and jitter. It returns the first other answer
// (with a *tether.Error if not 2xx); or, with a nil answer, ctx's error or
// a lease_lost error once the lease has certainly expired (it then ends
// the agent's context). maybeSent reports whether a try may have reached
// the server.
//
// The lease has certainly expired two TTLs after the last answer that
// renewed it: one TTL is the lease; the second covers renewals whose
// answers were lost, which the server can only have made while the lease
// was still valid.
func (t *runTransport) leased(ctx context.Context, path string, body []byte, hdr http.Header) (a *answer, maybeSent bool, err error) {
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			// Not sent: a batch of an agent whose context already ended is
			// not in doubt.
			return nil, maybeSent, context.Cause(ctx)
		}
		a, err = t.c.post(ctx, path, body, hdr, max(t.ttl/2, 5*time.Second))
		if err == nil {
			if a.status != http.StatusNoContent {
				t.lease.Renew(time.Now())
			}
			return a, true, nil
		}
		var wait time.Duration
		switch {
		case a == nil:
			maybeSent = maybeSent || !notSent(err)
		case !retryStatus(a.status):
			return a, maybeSent, err
		default:
			maybeSent = true
			wait = retryAfter(&http.Response{Header: a.header})
		}
		if ctx.Err() != nil {
			return nil, maybeSent, context.Cause(ctx)
		}
		if t.lease.Expired(t.ttl) {
			t.stop(errLeaseLost)
			return nil, maybeSent, tether.Wrap(err, tether.CodeLeaseLost, "the lease expired while the server could not be reached")
		}
		d := max(t.c.backoff(attempt), min(wait, t.c.max))
		t.log.Warn("tether worker: request failed; retrying", "path", path, "err", err, "delay", d)
		if sleep(ctx, d) != nil {
			return nil, maybeSent, context.Cause(ctx)
		}
	}
}

func retryStatus(s int) bool {
	return s >= 500 || s == http.StatusRequestTimeout || s == http.StatusTooManyRequests
}

// heartbeat renews the lease every TTL/3 while no append did. It ends the
// agent's context when the lease is lost or the run is over.
func (t *runTransport) heartbeat(ctx context.Context) {
	every := t.ttl / 3
	path := "/v1/runs/" + escape(t.run.ID) + "/heartbeat"
	hdr := http.Header{"Tether-Lease": {t.token}}
	for {
		if sleep(ctx, time.Until(t.lease.Last().Add(every))) != nil {
			return
		}
		if time.Since(t.lease.Last()) < every {
			continue // an append renewed it meanwhile
		}
		a, _, err := t.leased(ctx, path, nil, hdr)
		switch {
		case err == nil:
			t.noteResult(a)
		case a != nil:
			t.log.Info("tether worker: heartbeat refused", "err", err)
			if tether.CodeOf(err) == tether.CodeConflict {
				t.stop(errRunEnded) // the run is finished
			} else {
				t.refused(a, err)
			}
			return
		default:
			return // ctx ended, or the lease expired (the agent is stopped)
		}
	}
}

// follow follows the run from its run.started event: input goes to
// WaitInput; a cancel request or the end of the run ends the agent's
// context.
func (t *runTransport) follow(ctx context.Context) {
	after := t.offset
	for attempt := 0; ; attempt++ {
		var ferr error
		for u, err := range t.c.Subscribe(ctx, SubscribeRequest{RunID: t.run.ID, After: after}) {
			if err != nil {
				ferr = err
				break
			}
			if u.Snapshot != nil {
				after = u.Snapshot.Offset
				t.noteSnapshot(u.Snapshot)
				continue
			}
			after = u.Event.Offset
			t.noteEvent(u.Event)
		}
		if ctx.Err() != nil {
			return
		}
		if ferr == nil || tether.CodeOf(ferr) == tether.CodeNotFound {
			t.stop(errRunEnded)
			return
		}
		// Subscribe retries what can be retried; this is a refusal (a
		// token that may not read the run): keep trying, slowly.
		d := t.c.backoff(attempt)
		t.log.Warn("tether worker: following the run failed; retrying", "err", ferr, "delay", d)
		if sleep(ctx, d) != nil {
			return
		}
	}
}

func (t *runTransport) noteEvent(ev *tether.Event) {
	switch ev.Type {
	case tether.EventRunCancelRequested:
		t.stop(errCancelRequested)
	case tether.EventRunFinished:
		t.stop(errRunEnded)
	case tether.EventRunInput:
		t.answers.Put(ev.RequestID, ev.Value)
	}
}

// noteSnapshot handles a reset snapshot (the cursor was not in the log
// any more): it may show a cancel request or the end of the run.
func (t *runTransport) noteSnapshot(s *tether.Snapshot) {
	for _, r := range s.Runs {
		if r.ID != t.run.ID {
			continue
		}
		switch {
		case r.Status.Terminal():
			t.stop(errRunEnded)
		case !r.CancelRequestedAt.IsZero():
			t.stop(errCancelRequested)
		}
	}
}

// WaitInput waits for the run.input that answers requestID.
func (t *runTransport) WaitInput(ctx context.Context, requestID string) (json.RawMessage, error) {
	return t.answers.Wait(ctx, requestID)
}

// answer is the server's answer to one request of a worker.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// maxAnswer bounds the answers the client reads; a claim's answer holds
// the thread's conversation, a thread's snapshot all its messages.
const maxAnswer = 256 << 20

// post makes one POST with a JSON body (none if body is nil), bounded by
// timeout, and reads the answer. A non-2xx answer is returned with its
// *tether.Error; a transport error (also a cut answer), or a token the
// token function could not give (code token_unavailable, not sent),
// without an answer. A 401 token_expired is sent once more with a fresh
// token (see send).
func (c *Client) post(ctx context.Context, path string, body []byte, header http.Header, timeout time.Duration) (*answer, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, _, err := c.send(req)
	if err != nil {
		return nil, err
	}
	defer drain(resp.Body)
	a := &answer{status: resp.StatusCode, header: resp.Header}
	if resp.StatusCode/100 != 2 {
		return a, responseError(resp)
	}
	if a.body, err = io.ReadAll(io.LimitReader(resp.Body, maxAnswer)); err != nil {
		return nil, err
	}
	return a, nil
}
