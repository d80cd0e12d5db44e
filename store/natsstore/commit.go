package natsstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// maxAttempts bounds how often a commit is published again after another
// message got onto its thread's subject first without changing what the
// commit checks (a batch without events, a stale cache).
const maxAttempts = 8

// pendingCommit is a batch this node publishes: the notify consumer
// recognises it by its message ID and reports it without decoding it.
type pendingCommit struct {
	b     *store.Batch
	evs   []wireEvent
	runs  []*wireRun
	prods []wireProducer
	// h and msgID are set before the commit is registered with the store
	// and not changed while it is.
	h         *header
	msgID     string
	delivered chan struct{} // closed by the consumer once notified

	mu        sync.Mutex
	built     *store.Committed
	abandoned bool
}

// build sets the offsets of the batch's events and returns what the
// notify function gets. It returns nil once the committer gave up.
func (pc *pendingCommit) build(seq, epoch uint64) *store.Committed {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.abandoned || pc.built != nil {
		return pc.built
	}
	offs := offsets(epoch, seq, len(pc.evs))
	recs := make([]*tether.Record, len(offs))
	for i, e := range pc.b.Events {
		e.Offset = offs[i]
		recs[i] = tether.NewRecord(e, tether.WithOffset(pc.b.Encoded[i], offs[i]))
	}
	last := pc.h.Before
	if len(offs) > 0 {
		last = offs[len(offs)-1]
	}
	if pc.b.Thread != nil {
		pc.b.Thread.LastOffset = last
	}
	pc.built = &store.Committed{ThreadID: pc.b.ThreadID, Before: pc.h.Before, Records: recs, Events: pc.b.Events}
	return pc.built
}

func (pc *pendingCommit) abandon() {
	pc.mu.Lock()
	pc.abandoned = true
	pc.mu.Unlock()
}

func (s *Store) register(pc *pendingCommit) {
	s.mu.Lock()
	s.pending[pc.msgID] = pc
	s.mu.Unlock()
}

func (s *Store) takePending(msgID string) *pendingCommit {
	if msgID == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pc := s.pending[msgID]
	delete(s.pending, msgID)
	return pc
}

// Commit implements store.Store. The batch becomes one message on its
// thread's subject, published with the thread's last message as the
// expected last sequence of the subject: the check against the thread's
// version and the append are one atomic step of the stream. Batches of
// different threads are in flight together (group commit is the stream's).
//
// Once published, Commit writes the batch's rows to the bucket and waits
// for this node's consumer of the log to report the batch to the notify
// function, then returns: never before, however late the consumer (see
// awaitDelivery). If ctx ends before the batch is published,
// Commit returns ctx.Err() and the batch is not committed; once published,
// Commit finds out whether it was stored (publishing it again under the
// same message ID if needed) and answers that, whatever ctx does.
func (s *Store) Commit(ctx context.Context, b *store.Batch) (*store.Result, error) {
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.inflight.Done()
	pc, err := prepare(b)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e := s.acquire(b.ThreadID)
	defer s.release(e)
	select {
	case e.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	locked := true
	unlock := func() {
		if locked {
			<-e.lock
			locked = false
		}
	}
	defer unlock()

	subject := s.logSubject(b.ThreadID)
	var seq uint64
	fresh := false
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		st, err := s.commitState(ctx, e, fresh)
		if err != nil {
			return nil, s.readErr("commit", err)
		}
		err = st.check(b)
		if err == nil && !b.Create {
			err = s.checkKeys(ctx, e, st, pc.runs)
		} else if err == nil {
			err = checkBatchKeys(pc.runs)
		}
		if err == nil && len(b.Leases) > 0 {
			err = s.checkLeases(ctx, e, st, b.Create, b.Leases)
		}
		if err != nil {
			if !fresh && !errors.Is(err, errInvalid) {
				fresh = true // the cache may be behind: look again
				continue
			}
			return nil, err
		}
		h := &header{ID: b.ThreadID, Create: b.Create, Prev: st.seq, Inc: st.inc, Version: st.version, Before: st.last,
			Runs: pc.runs, Producers: pc.prods}
		if b.Create {
			h.Inc, h.Version, h.Before = 0, 0, tether.OffsetStart
		}
		if b.Thread != nil {
			h.Thread = toWireThread(b.Thread)
		}
		body, err := encodeBody(h, pc.evs)
		if err != nil {
			return nil, err
		}
		// The server the connection is on now: after a reconnect it may
		// take less than the one Open saw (and the stream's max_msg_size
		// may be smaller still: the publish then fails with ErrTooLarge).
		if maxPayload := int(s.nc.MaxPayload()); len(body)+256 > maxPayload {
			return nil, fmt.Errorf("%w: a batch of %d bytes, larger than the server's max_payload (%d)", store.ErrTooLarge, len(body), maxPayload)
		}
		pc.h, pc.msgID = h, nuid.Next()
		s.register(pc)
		// The publish's own deadline, not ctx: once sent, the outcome must
		// be found out.
		ack, err := s.publish(context.Background(), subject, body, int64(st.seq), pc.msgID, 0)
		if err == nil {
			seq = ack.Sequence
		} else if !errors.Is(err, errCAS) && !definite(err) {
			seq, err = s.resolve(subject, st.seq, pc.msgID, body)
			if err != nil {
				pc.abandon()
				s.takePending(pc.msgID)
				s.forget(e)
				return nil, fmt.Errorf("natsstore: commit to %s: outcome unknown: %w", b.ThreadID, err)
			}
			if seq == 0 {
				err = errCAS
			}
		}
		if err != nil {
			s.takePending(pc.msgID)
			s.forget(e)
			if errors.Is(err, errCAS) && attempt < maxAttempts {
				fresh = true
				continue
			}
			if errors.Is(err, errCAS) {
				return nil, store.ErrConflict
			}
			return nil, fmt.Errorf("natsstore: commit to %s: %w", b.ThreadID, err)
		}
		break
	}

	// Committed. The next batch of the thread may go; the bucket writes of
	// this node's batches of the thread go in log order.
	m := &logMsg{seq: seq, h: pc.h, n: len(pc.evs), msgID: pc.msgID}
	e.mu.Lock()
	if v := e.view; v != nil && v.seq < seq {
		if v.seq != pc.h.Prev || v.fold(m, s.epoch) != nil {
			e.view = nil
		}
	}
	prev := e.applied
	done := make(chan struct{})
	e.applied = done
	e.mu.Unlock()
	unlock()

	actx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	if prev != nil {
		<-prev
	}
	if s.dieAfterPublish.Load() {
		close(done)
		c, err := s.awaitDelivery(pc, seq)
		if err != nil {
			return nil, err
		}
		return &store.Result{Records: c.Records, Before: pc.h.Before, Version: pc.h.Version + int64(len(pc.evs))}, nil
	}
	if err := s.apply(actx, b.ThreadID, m); err != nil {
		// The repairer writes it later; until then thread-scoped reads fold
		// it from the log.
		s.log.Warn("natsstore: write the rows of a batch", "thread", b.ThreadID, "seq", seq, "err", err)
	} else {
		e.mu.Lock()
		if e.view != nil {
			e.view.prune(seq)
		}
		e.mu.Unlock()
	}
	close(done)

	c, err := s.awaitDelivery(pc, seq)
	if err != nil {
		return nil, err
	}
	return &store.Result{Records: c.Records, Before: pc.h.Before, Version: pc.h.Version + int64(len(pc.evs))}, nil
}

// errInvalid marks a batch the engine should never build.
var errInvalid = errors.New("natsstore: invalid batch")

// prepare checks a batch and encodes what does not depend on the thread's
// state.
func prepare(b *store.Batch) (*pendingCommit, error) {
	switch {
	case b == nil:
		return nil, fmt.Errorf("%w: nil", errInvalid)
	case b.ThreadID == "":
		return nil, fmt.Errorf("%w: no thread ID", errInvalid)
	case b.Create && b.Thread == nil:
		return nil, fmt.Errorf("%w: creates a thread without its row", errInvalid)
	case len(b.Encoded) != len(b.Events):
		return nil, fmt.Errorf("%w: %d events and %d encodings", errInvalid, len(b.Events), len(b.Encoded))
	case len(b.Events) >= eventsPerMsg || len(b.Runs) >= eventsPerMsg:
		return nil, fmt.Errorf("%w: more than %d events or runs in one batch", store.ErrTooLarge, eventsPerMsg-1)
	}
	pc := &pendingCommit{b: b, evs: make([]wireEvent, len(b.Events)), delivered: make(chan struct{})}
	for i, enc := range b.Encoded {
		ev := b.Events[i]
		if len(enc) < 2 || enc[0] != '{' || ev == nil {
			return nil, fmt.Errorf("%w: event %d is not an encoded event", errInvalid, i)
		}
		pc.evs[i] = wireEvent{Type: ev.Type, RunID: ev.RunID, MessageID: ev.MessageID, Data: enc}
	}
	for _, rr := range b.Runs {
		if rr == nil || rr.Run.ID == "" {
			return nil, fmt.Errorf("%w: run without ID", errInvalid)
		}
		if rr.Run.ThreadID != b.ThreadID {
			return nil, fmt.Errorf("%w: run %s belongs to thread %q, not %q", errInvalid, rr.Run.ID, rr.Run.ThreadID, b.ThreadID)
		}
		w, err := toWireRun(rr)
		if err != nil {
			return nil, err
		}
		pc.runs = append(pc.runs, w)
	}
	for _, p := range b.Producers {
		pc.prods = append(pc.prods, wireProducer{Key: p.Key, Epoch: p.Epoch, Seq: p.Seq})
	}
	return pc, nil
}

// state is what a commit checks of its thread.
type state struct {
	v       *threadView
	seq     uint64
	exists  bool
	inc     uint64
	version int64
	last    tether.Offset
}

func (st state) check(b *store.Batch) error {
	switch {
	case b.Create && st.exists:
		return store.ErrExists
	case b.Create:
		return nil
	case !st.exists:
		return store.ErrNotFound
	case st.version != b.Version:
		return store.ErrConflict
	}
	return nil
}

// commitState returns the state of the entry's thread: the cached view
// unless fresh, else the current one. The entry's lock is held.
func (s *Store) commitState(ctx context.Context, e *entry, fresh bool) (state, error) {
	for range 3 {
		if fresh || !s.hasView(e) {
			if err := s.refresh(ctx, e); err != nil {
				return state{}, err
			}
		}
		e.mu.Lock()
		v := e.view
		if v == nil {
			e.mu.Unlock()
			fresh = true
			continue
		}
		st := state{v: v, seq: v.seq, exists: v.exists, inc: v.inc, version: v.version, last: v.last}
		e.mu.Unlock()
		return st, nil
	}
	return state{}, errors.New("natsstore: the thread's state keeps changing")
}

func (s *Store) hasView(e *entry) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.view != nil
}

// forget drops the cached view of a thread.
func (s *Store) forget(e *entry) {
	e.mu.Lock()
	e.view = nil
	e.mu.Unlock()
}

// checkBatchKeys returns ErrExists if two runs of a batch share a key.
func checkBatchKeys(runs []*wireRun) error {
	owners := map[string]string{}
	for _, r := range runs {
		if r.Key == "" {
			continue
		}
		if o, ok := owners[r.Key]; ok && o != r.id {
			return store.ErrExists
		}
		owners[r.Key] = r.id
	}
	return nil
}

// checkKeys returns ErrExists if a run of a batch takes an idempotency key
// that another run of the thread holds (as of st), or another run of the
// batch.
func (s *Store) checkKeys(ctx context.Context, e *entry, st state, runs []*wireRun) error {
	owners := map[string]string{}
	for _, r := range runs {
		if r.Key == "" {
			continue
		}
		o, ok := owners[r.Key]
		if !ok {
			var err error
			if o, err = s.keyOwner(ctx, e, st, r.Key); err != nil {
				return err
			}
		}
		if o != "" && o != r.id {
			return store.ErrExists
		}
		owners[r.Key] = r.id
	}
	return nil
}

// keyOwner returns the run of the thread that holds an idempotency key as
// of st, "" if none: from the tail of the view, else from the bucket (which
// has every row up to the view's rowSeq), remembered in the view.
func (s *Store) keyOwner(ctx context.Context, e *entry, st state, key string) (string, error) {
	e.mu.Lock()
	o, ok := st.v.keys[key]
	e.mu.Unlock()
	if ok {
		return o, nil
	}
	kr, err := s.keyRow(ctx, e.id, key)
	if err != nil {
		return "", err
	}
	if kr != nil && kr.Inc == st.inc {
		o = kr.Run
	}
	e.mu.Lock()
	if _, ok := st.v.keys[key]; !ok && len(st.v.keys) < maxTail {
		if st.v.keys == nil {
			st.v.keys = make(map[string]string)
		}
		st.v.keys[key] = o
	}
	e.mu.Unlock()
	return o, nil
}

// definite reports whether a failed publish surely stored nothing.
func definite(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, store.ErrTooLarge) || errors.As(err, &apiErr)
}

// resolve finds out whether the message msgID, published after prev on
// subject with an unknown outcome, was stored, and returns its sequence, or
// 0 if it was not and never will be. The message after prev on the subject
// is either it or another one (which makes it fail); while there is none,
// it publishes the message again: the stream drops the copy of one that
// was stored meanwhile, and the expected sequence the copy of one stored
// after another.
func (s *Store) resolve(subject string, prev uint64, msgID string, body []byte) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*s.opts.Timeout)
	defer cancel()
	for {
		m, err := s.leaderGet(ctx, s.logName, msgGetRequest{Seq: prev + 1, NextFor: subject})
		switch {
		case err == nil && m.Header.Get(jetstream.MsgIDHeader) == msgID:
			return m.Seq, nil
		case err == nil:
			return 0, nil
		case errors.Is(err, errNoMsg):
			ack, err := s.publish(ctx, subject, body, int64(prev), msgID, 0)
			if err == nil {
				return ack.Sequence, nil
			}
			if !errors.Is(err, errCAS) && definite(err) {
				return 0, err
			}
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// awaitDelivery waits for the notify consumer to report the batch, and
// returns what it reported. A Commit must not succeed before its batch is
// passed to the notify function (store.Store: a caller told it committed
// may tell a client, whose subscription must then see it), so a consumer
// that is late (recreated after missed heartbeats, its server lost) is
// waited for as long as the store is open; past Timeout that is logged.
// Once Close has started, it waits Timeout more, then gives up with
// ErrUnavailable: committed, but not reported before this Commit returns.
func (s *Store) awaitDelivery(pc *pendingCommit, seq uint64) (*store.Committed, error) {
	s.awaiting.Add(1)
	defer s.awaiting.Add(-1)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	warned := false
	var closing time.Time
	for {
		select {
		case <-pc.delivered:
			return pc.build(seq, s.epoch), nil
		case <-tick.C:
		}
		waited := time.Since(start)
		switch {
		case s.delivered.Load() >= seq:
			// The consumer went past the batch without seeing it: it was
			// purged (its thread deleted) first.
		case waited > time.Second && waited%time.Second < 50*time.Millisecond && s.purged(seq):
			// The same, and nothing came after it.
		default:
			if waited > s.opts.Timeout && !warned {
				warned = true
				s.late.Add(1)
				s.log.Error("natsstore: a committed batch was not delivered to this node's consumer in time; its commit waits for it",
					"thread", pc.b.ThreadID, "seq", seq, "waited", waited)
			}
			if s.isClosed() {
				if closing.IsZero() {
					closing = time.Now()
				} else if time.Since(closing) > s.opts.Timeout {
					s.takePending(pc.msgID)
					return nil, fmt.Errorf("natsstore: commit to %s: stored at %d, but not delivered to this node's consumer before the store closed: %w",
						pc.b.ThreadID, seq, store.ErrUnavailable)
				}
			}
			continue
		}
		select {
		case <-pc.delivered:
		default:
			s.takePending(pc.msgID)
		}
		return pc.build(seq, s.epoch), nil
	}
}

// purged reports whether the log message seq is gone.
func (s *Store) purged(seq uint64) bool {
	_, err := s.leaderGet(s.stopCtx, s.logName, msgGetRequest{Seq: seq})
	return errors.Is(err, errNoMsg)
}

// AwaitingDelivery implements [store.Delivery].
func (s *Store) AwaitingDelivery() int64 { return s.awaiting.Load() }

// LateDeliveries implements [store.Delivery].
func (s *Store) LateDeliveries() int64 { return s.late.Load() }
