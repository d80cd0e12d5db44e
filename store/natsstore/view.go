package natsstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	tether "github.com/tetherhq/tether"
)

// A threadView is the state of a thread as of the log message seq: what a
// commit checks and what the thread-scoped reads answer from. It is the
// thread's row in the bucket, which reflects every message up to rowSeq,
// plus the messages after that (the tail): what those changed is kept here
// until the bucket has it too.
type threadView struct {
	seq     uint64 // the thread's last message (0: none)
	exists  bool
	inc     uint64 // the thread's Create message
	version int64
	last    tether.Offset
	row     *wireThread

	rowSeq uint64
	runs   map[string]*tailRun     // by run ID
	keys   map[string]string       // idempotency key → run ID ("": known free)
	prods  map[string]wireProducer // by producer key
}

// tailRun is a run changed by a message of the tail.
type tailRun struct {
	w     *wireRun
	seq   uint64
	first uint64 // the run's place among the active runs, if the tail created it
}

// maxTail bounds what a cached view keeps of its tail; past it the view is
// dropped and read again from the bucket, which by then has most of it.
const maxTail = 512

// logMsg is a decoded log message, its events left encoded.
type logMsg struct {
	seq   uint64
	h     *header
	rest  []byte // the events
	n     int    // how many
	msgID string
	time  time.Time
}

func parseLogMsg(seq uint64, data []byte, hdr nats.Header) (*logMsg, error) {
	h, rest, err := decodeHeader(data)
	if err != nil {
		return nil, fmt.Errorf("message %d: %w", seq, err)
	}
	n, err := countEvents(rest)
	if err != nil {
		return nil, fmt.Errorf("message %d: %w", seq, err)
	}
	m := &logMsg{seq: seq, h: h, rest: rest, n: n}
	if hdr != nil {
		m.msgID = hdr.Get(jetstream.MsgIDHeader)
	}
	return m, nil
}

func parseRaw(r *rawMsg) (*logMsg, error) {
	m, err := parseLogMsg(r.Seq, r.Data, r.Header)
	if m != nil {
		m.time = r.Time
	}
	return m, err
}

var errGap = errors.New("natsstore: log message does not follow the thread's state")

// fold applies the message m, which must follow the view.
func (v *threadView) fold(m *logMsg, epoch uint64) error {
	h := m.h
	switch {
	case h.Delete:
		*v = threadView{seq: m.seq, last: tether.OffsetStart, rowSeq: v.rowSeq}
		return nil
	case h.Create:
		*v = threadView{seq: m.seq, exists: true, inc: m.seq, last: tether.OffsetStart, rowSeq: v.rowSeq}
	case !v.exists || h.Prev != v.seq:
		return errGap
	default:
		v.seq = m.seq
	}
	v.version += int64(m.n)
	if m.n > 0 {
		v.last = offsetOf(epoch, m.seq, m.n-1)
	}
	if h.Thread != nil {
		v.row = h.Thread
	}
	for j, r := range h.Runs {
		if v.runs == nil {
			v.runs = make(map[string]*tailRun)
		}
		tr := &tailRun{w: r, seq: m.seq, first: m.seq*eventsPerMsg + uint64(j)}
		if old := v.runs[r.id]; old != nil {
			tr.first = old.first
		}
		v.runs[r.id] = tr
		if r.Key != "" {
			if v.keys == nil {
				v.keys = make(map[string]string)
			}
			v.keys[r.Key] = r.id
		}
	}
	for _, p := range h.Producers {
		if v.prods == nil {
			v.prods = make(map[string]wireProducer)
		}
		v.prods[p.Key] = p
	}
	return nil
}

// prune forgets what the tail changed up to seq, which the bucket now has.
func (v *threadView) prune(seq uint64) {
	if seq <= v.rowSeq {
		return
	}
	v.rowSeq = seq
	for id, r := range v.runs {
		if r.seq <= seq {
			delete(v.runs, id)
		}
	}
	// Producers carry no sequence; the bucket has them once the tail is gone.
	if len(v.runs) == 0 && v.seq <= seq {
		v.prods = nil
	}
	if len(v.keys) > maxTail {
		v.keys = nil
	}
}

func (v *threadView) tooBig() bool {
	return len(v.runs)+len(v.prods)+len(v.keys) > maxTail
}

func (v *threadView) record() tether.Thread {
	if v.row == nil {
		return tether.Thread{LastOffset: v.last}
	}
	return v.row.thread(v.last)
}

// An entry is what the store keeps of a thread it has seen.
type entry struct {
	id string
	// lock is held from a commit's checks to its acknowledgement, and by
	// DeleteThread: a node publishes one batch of a thread at a time.
	lock chan struct{}
	refs int // guarded by Store.mu

	mu   sync.Mutex
	view *threadView // nil: unknown
	// applied is closed once the bucket write of the last batch this node
	// published is done: bucket writes of one thread go in log order.
	applied chan struct{}
}

// acquire returns the entry of a thread, held until release.
func (s *Store) acquire(id string) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.threads[id]
	if e == nil {
		if len(s.threads) >= maxCachedThreads {
			for k, old := range s.threads {
				if old.refs == 0 {
					delete(s.threads, k)
				}
				if len(s.threads) < maxCachedThreads/2 {
					break
				}
			}
		}
		e = &entry{id: id, lock: make(chan struct{}, 1)}
		s.threads[id] = e
	}
	e.refs++
	return e
}

func (s *Store) release(e *entry) {
	s.mu.Lock()
	e.refs--
	s.mu.Unlock()
}

// cached returns the entry of a thread if the store has one.
func (s *Store) cached(id string) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.threads[id]
}

// lastMsg returns the last message of a thread's log, from the stream's
// leader, or nil if the log is empty.
func (s *Store) lastMsg(ctx context.Context, id string) (*logMsg, error) {
	r, err := s.leaderGet(ctx, s.logName, msgGetRequest{LastFor: s.logSubject(id)})
	if errors.Is(err, errNoMsg) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseRaw(r)
}

// current reports whether v, brought forward by last (the thread's last
// message, nil if none) if it is the next one, is the thread's state.
func (v *threadView) current(last *logMsg, epoch uint64) bool {
	switch {
	case last == nil:
		return !v.exists && v.seq == 0
	case last.seq <= v.seq:
		// v may be newer than the lookup: a commit of this node landed
		// meanwhile.
		return true
	case last.h.Create || last.h.Delete || last.h.Prev == v.seq:
		return v.fold(last, epoch) == nil && !v.tooBig()
	}
	return false
}

// withView calls fn with the thread's current view, under the entry's lock:
// fn must not block. The view reflects every batch committed before the
// call; it costs one request to the leader when the store has the thread
// cached, a few more when it does not.
func (s *Store) withView(ctx context.Context, id string, fn func(v *threadView) error) error {
	e := s.acquire(id)
	defer s.release(e)
	for range 3 {
		if err := s.refresh(ctx, e); err != nil {
			return err
		}
		e.mu.Lock()
		if e.view != nil {
			defer e.mu.Unlock()
			return fn(e.view)
		}
		e.mu.Unlock()
	}
	return errors.New("natsstore: the thread's state keeps changing")
}

// errLogChanged says the log moved under a read: between its last message
// and the read of the messages before it, the thread was deleted (purged) or
// re-created. Reading again from the new last message settles it.
var errLogChanged = errors.New("natsstore: log changed while read")

// refresh makes the entry's view the thread's current one.
func (s *Store) refresh(ctx context.Context, e *entry) error {
	var err error
	for range 5 {
		if err = s.refreshOnce(ctx, e); !errors.Is(err, errLogChanged) {
			return err
		}
	}
	return err
}

func (s *Store) refreshOnce(ctx context.Context, e *entry) error {
	last, err := s.lastMsg(ctx, e.id)
	if err != nil {
		return err
	}
	if fn := s.afterLast.Load(); fn != nil {
		(*fn)(e.id)
	}
	e.mu.Lock()
	if e.view != nil && e.view.current(last, s.epoch) {
		e.mu.Unlock()
		return nil
	}
	e.view = nil
	e.mu.Unlock()
	v, err := s.loadView(ctx, e.id, last)
	if err != nil {
		return err
	}
	e.mu.Lock()
	if e.view == nil || e.view.seq < v.seq {
		e.view = v
	}
	e.mu.Unlock()
	return nil
}

// loadView builds a thread's view from its row in the bucket and the log
// after it, up to last (the log's last message, nil if none).
func (s *Store) loadView(ctx context.Context, id string, last *logMsg) (*threadView, error) {
	if last == nil {
		// An empty log: whatever the bucket says, the thread does not exist.
		return &threadView{last: tether.OffsetStart}, nil
	}
	row, _, err := s.threadRow(ctx, id)
	if err != nil {
		return nil, err
	}
	v := &threadView{last: tether.OffsetStart}
	if row != nil {
		v.seq, v.rowSeq = row.Seq, row.Seq
		if !row.Del {
			v.exists, v.inc, v.version, v.last, v.row = true, row.Inc, row.Version, row.Last, &row.Thread
		}
	}
	switch {
	case last.seq == v.seq:
		return v, nil
	case last.seq > v.seq && (last.h.Create || last.h.Delete || last.h.Prev == v.seq):
		if err := v.fold(last, s.epoch); err != nil {
			return nil, err
		}
		return v, nil
	case last.seq < v.seq:
		// The bucket is ahead of the log (restored apart?): the log wins.
		v = &threadView{last: tether.OffsetStart}
	}
	raws, err := s.readLog(ctx, s.logSubject(id), v.seq+1, last.seq, math.MaxInt, 0)
	if err != nil {
		return nil, err
	}
	if len(raws) == 0 || raws[len(raws)-1].Seq != last.seq {
		return nil, fmt.Errorf("natsstore: thread %s: %w", id, errLogChanged)
	}
	for _, r := range raws {
		m, err := parseRaw(r)
		if err != nil {
			return nil, err
		}
		if err := v.fold(m, s.epoch); err != nil {
			return nil, fmt.Errorf("natsstore: thread %s at %d: %w", id, m.seq, err)
		}
	}
	return v, nil
}

// readLog returns the messages of a log subject with sequences from..to,
// at most max, in order. to must come from the leader (the subject's last
// message): below it the log only changes by purges, so the answer of a
// lagging replica is right as far as it goes, and where it stops short the
// leader is asked for the rest. With maxBytes above zero it stops once the
// messages' data reach maxBytes (the first message always comes), so that a
// reader bounded in bytes does not fetch max messages of a MiB each.
func (s *Store) readLog(ctx context.Context, subject string, from, to uint64, max, maxBytes int) ([]*rawMsg, error) {
	var out []*rawMsg
	leader := false
	size := 0
	for from <= to && len(out) < max && (maxBytes <= 0 || size < maxBytes) {
		var msgs []*rawMsg
		if !leader {
			batch := min(max-len(out), 1024)
			reqBytes := 8 << 20
			if maxBytes > 0 {
				reqBytes = min(reqBytes, maxBytes-size) // the server sends one message past it
			}
			var err error
			msgs, err = s.directBatch(ctx, s.logName, msgGetRequest{Seq: from, NextFor: subject, Batch: batch, MaxBytes: reqBytes})
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				s.log.Debug("natsstore: direct get", "subject", subject, "err", err)
			}
			for i, m := range msgs {
				if m.Seq > to || m.Subject != subject {
					msgs = msgs[:i]
					break
				}
			}
		}
		if len(msgs) == 0 {
			// A lagging replica (or none that answers): the leader knows.
			leader = true
			m, err := s.leaderGet(ctx, s.logName, msgGetRequest{Seq: from, NextFor: subject})
			if errors.Is(err, errNoMsg) {
				return out, nil // purged meanwhile
			}
			if err != nil {
				return nil, err
			}
			if m.Seq > to {
				return out, nil
			}
			msgs = []*rawMsg{m}
		}
		out = append(out, msgs...)
		for _, m := range msgs {
			size += len(m.Data)
		}
		from = msgs[len(msgs)-1].Seq + 1
	}
	return out, nil
}
