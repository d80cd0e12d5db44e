package hub

import (
	"container/heap"
	"context"
	"strings"
	"sync"
	"sync/atomic"

	tether "github.com/tetherhq/tether"
)

// History reads committed records of a thread after an offset, in order
// (the store's ReadPage): up to limit records and, past the first, up to
// maxBytes bytes (Record.Size) of them. more is false only when the page
// reached the end of the log as it was read: a page cut by bytes is short
// with the log going on. after is OffsetStart or the offset of an event of
// the thread.
type History func(ctx context.Context, threadID string, after tether.Offset, limit, maxBytes int) (recs []*tether.Record, more bool, err error)

// Options configures a [Hub]. The zero value gives the defaults.
type Options struct {
	// RingSize is the number of recent records kept per thread, so that
	// resumes from a recent offset need no store read. Defaults to 1024.
	RingSize int
	// RingBytes bounds the bytes (Record.Size) kept per thread ring.
	// Defaults to 1 MiB.
	RingBytes int
	// BufferBytes bounds the bytes (Record.Size) queued for one subscriber;
	// a subscriber that would exceed it is cut with ErrSlow. Defaults to 1 MiB.
	BufferBytes int
	// BufferEvents bounds the records queued for one subscriber; a
	// subscriber that would exceed it is cut with ErrSlow. Defaults to 8192.
	BufferEvents int
	// IdleTopics is the number of threads without subscribers whose rings
	// are kept; beyond it, the least recently published is evicted.
	// Defaults to 256.
	IdleTopics int
	// HistoryPage is the number of records asked of History per call.
	// Defaults to 512.
	HistoryPage int
	// HistoryBytes bounds the bytes (Record.Size) of one page of History,
	// which a subscriber catching up holds until its reader has written it
	// out: a page of large events is cut short (one larger than this still
	// comes whole). Defaults to 1 MiB.
	HistoryBytes int
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.RingSize, 1024)
	def(&o.RingBytes, 1<<20)
	def(&o.BufferBytes, 1<<20)
	def(&o.BufferEvents, 8192)
	def(&o.IdleTopics, 256)
	def(&o.HistoryPage, 512)
	def(&o.HistoryBytes, 1<<20)
	return o
}

// Stats is a snapshot of a hub's size, for metrics.
type Stats struct {
	// Topics is the number of threads the hub holds (with or without
	// subscribers).
	Topics int
	// Subscribers is the number of subscribers receiving published records
	// (not yet closed, cut or ended).
	Subscribers int
	// RingRecords and RingBytes are the records and bytes held by all rings.
	RingRecords int
	RingBytes   int
}

// Hub fans committed records out to the subscribers of each thread. All
// methods are safe for concurrent use.
type Hub struct {
	history History
	opts    Options

	// Lock order: Hub.mu, then topic.mu, then Subscriber.mu.
	mu     sync.Mutex
	topics map[string]*topic
	idle   idleHeap // topics without subscribers, least recently published first
	seq    uint64   // publish clock for idle eviction
	closed bool
	// interrupted, while set, ends every new subscriber at once with it
	// (Interrupt, Resume).
	interrupted error

	subs        atomic.Int64
	ringRecords atomic.Int64
	ringBytes   atomic.Int64
}

// topic is the hub's state for one thread.
type topic struct {
	id string

	// Guarded by Hub.mu.
	handles int    // subscribers not yet closed by their owner
	pubSeq  uint64 // Hub.seq at the last publish (or creation)
	idx     int    // index in Hub.idle, -1 if absent

	mu   sync.Mutex
	dead bool // removed from the hub: publishers must look the thread up again
	ring ring
	subs []*Subscriber // receiving published records; Subscriber.idx is the index
}

// New returns a hub that reads missed records with history.
func New(history History, opts Options) *Hub {
	return &Hub{history: history, opts: opts.withDefaults(), topics: make(map[string]*topic)}
}

// Publish hands the hub a committed batch of a thread: recs in offset
// order, before the thread's last offset before them (OffsetStart for the
// first). Batches of a thread must be published in commit order, one call
// after the other. Publish never blocks on subscribers: one whose buffer
// would overflow is cut with ErrSlow. The hub keeps the records, which must
// not be modified afterwards.
func (h *Hub) Publish(threadID string, before tether.Offset, recs []*tether.Record) {
	if len(recs) == 0 {
		return
	}
	if before == "" {
		before = tether.OffsetStart
	}
	size := 0
	for _, r := range recs {
		size += r.Size()
	}
	for {
		t := h.touch(threadID)
		if t == nil {
			return
		}
		t.mu.Lock()
		if t.dead { // evicted or closed since touch: use the new topic
			t.mu.Unlock()
			continue
		}
		h.record(t, before, recs)
		for i := 0; i < len(t.subs); {
			s := t.subs[i]
			if s.deliver(before, recs, size) {
				i++
				continue
			}
			t.detach(s)
			h.subs.Add(-1)
		}
		t.mu.Unlock()
		return
	}
}

// record appends a batch to the ring of t, resetting it first if the batch
// does not follow the last one: the ring never holds a gap.
func (h *Hub) record(t *topic, before tether.Offset, recs []*tether.Record) {
	r := &t.ring
	n0, b0 := r.n, r.bytes
	if !r.init || before != r.last {
		r.reset(before)
	}
	for _, rec := range recs {
		r.push(rec, h.opts.RingSize, h.opts.RingBytes)
	}
	h.ringRecords.Add(int64(r.n - n0))
	h.ringBytes.Add(int64(r.bytes - b0))
}

// touch returns the topic of a thread, creating it, and marks it as just
// published. It returns nil once the hub is closed.
func (h *Hub) touch(threadID string) *topic {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	t := h.topic(threadID)
	h.seq++
	t.pubSeq = h.seq
	if t.handles == 0 {
		if t.idx < 0 {
			heap.Push(&h.idle, t)
		} else {
			heap.Fix(&h.idle, t.idx)
		}
		h.evict()
	}
	return t
}

// topic returns the topic of a thread, creating it. h.mu is held.
func (h *Hub) topic(threadID string) *topic {
	t := h.topics[threadID]
	if t == nil {
		h.seq++
		// The topic's own copy of the ID, which its subscribers share: the
		// caller's may be a slice of a request (of its whole first line),
		// which each idle stream would otherwise keep.
		t = &topic{id: strings.Clone(threadID), idx: -1, pubSeq: h.seq}
		h.topics[threadID] = t
	}
	return t
}

// evict drops idle topics beyond the limit. h.mu is held. The topic just
// published has the newest pubSeq, so it is never the one evicted.
func (h *Hub) evict() {
	for h.idle.Len() > h.opts.IdleTopics {
		t := heap.Pop(&h.idle).(*topic)
		delete(h.topics, t.id)
		h.kill(t)
	}
}

// DropIdle drops the topics of every thread without subscribers, rings
// and all, and returns how many. It is for a server that has gone quiet
// after a burst: the records those rings hold were allocated among the
// burst's garbage and keep much of the heap it grew to from being
// returned; a later resume of those threads reads the store instead.
func (h *Hub) DropIdle() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.idle.Len()
	for h.idle.Len() > 0 {
		t := heap.Pop(&h.idle).(*topic)
		delete(h.topics, t.id)
		h.kill(t)
	}
	return n
}

// kill ends the subscribers of a topic removed from the map, and drops its
// ring. h.mu is held.
func (h *Hub) kill(t *topic) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dead = true
	for _, s := range t.subs {
		s.idx = -1
		s.end(ErrClosed)
	}
	h.subs.Add(-int64(len(t.subs)))
	t.subs = nil
	h.ringRecords.Add(-int64(t.ring.n))
	h.ringBytes.Add(-int64(t.ring.bytes))
	t.ring.drop()
}

// Subscribe returns a subscriber to the records of a thread after offset
// after: OffsetStart (or "") for the whole log, or the offset of an event
// of the thread. It registers the subscriber at once, so no record
// published after Subscribe returns is missed, and does no I/O: what the
// ring of recent records does not cover is read from History by
// [Subscriber.Next]. A cursor that names no event of the thread makes Next
// return History's error. The caller must Close the subscriber.
func (h *Hub) Subscribe(threadID string, after tether.Offset) *Subscriber {
	if after == "" {
		after = tether.OffsetStart
	}
	s := &Subscriber{hub: h, thread: threadID, pos: after, tail: after, idx: -1, ready: make(chan struct{}, 1)}
	h.mu.Lock()
	if h.closed || h.interrupted != nil {
		s.err = ErrClosed
		if !h.closed {
			s.err = h.interrupted
		}
		h.mu.Unlock()
		s.signal()
		return s
	}
	t := h.topic(threadID)
	t.handles++
	if t.idx >= 0 {
		heap.Remove(&h.idle, t.idx)
	}
	s.topic, s.thread = t, t.id
	h.mu.Unlock()

	t.mu.Lock()
	s.mu.Lock()
	if t.dead { // closed between the lookup and now
		s.err = ErrClosed
	} else {
		s.attach(&t.ring)
		s.idx = len(t.subs)
		t.subs = append(t.subs, s)
		h.subs.Add(1)
	}
	ready := len(s.queue) > 0 || s.catchup || s.err != nil
	s.mu.Unlock()
	t.mu.Unlock()
	if ready {
		s.signal()
	}
	return s
}

// release is Subscriber.Close's part in the hub: it detaches s and keeps
// its topic as idle if it was the last subscriber.
func (h *Hub) release(s *Subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := s.topic
	if t == nil {
		return
	}
	s.topic = nil
	t.handles--
	t.mu.Lock()
	if s.idx >= 0 {
		t.detach(s)
		h.subs.Add(-1)
	}
	current := h.topics[t.id] == t
	if current && t.handles == 0 && !t.ring.init {
		// Nothing was ever published: keeping it would only hold the name.
		delete(h.topics, t.id)
		t.dead = true
		current = false
	}
	t.mu.Unlock()
	if current && t.handles == 0 {
		heap.Push(&h.idle, t)
		h.evict()
	}
}

// detach removes s from the fan-out of t. t.mu is held.
func (t *topic) detach(s *Subscriber) {
	last := len(t.subs) - 1
	moved := t.subs[last]
	t.subs[s.idx] = moved
	moved.idx = s.idx
	t.subs[last] = nil
	t.subs = t.subs[:last]
	s.idx = -1
}

// CloseThread ends the subscribers of a thread with ErrClosed (after what
// they had queued) and drops its ring. The engine calls it when the thread
// is deleted.
func (h *Hub) CloseThread(threadID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[threadID]
	if t == nil {
		return
	}
	delete(h.topics, threadID)
	if t.idx >= 0 {
		heap.Remove(&h.idle, t.idx)
	}
	h.kill(t)
}

// Interrupt ends every subscriber with err (after what it had queued),
// and every later one at once, until Resume; it keeps the rings. The
// engine calls it when it can no longer follow the log, so that clients
// resume elsewhere instead of waiting on a stream that gets nothing:
// those of the engine and of every other service on the hub (Durable
// Streams) alike.
func (h *Hub) Interrupt(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.interrupted = err
	for _, t := range h.topics {
		t.mu.Lock()
		for _, s := range t.subs {
			s.idx = -1
			s.end(err)
		}
		h.subs.Add(-int64(len(t.subs)))
		t.subs = nil
		t.mu.Unlock()
	}
}

// Resume lets subscribers in again after Interrupt.
func (h *Hub) Resume() {
	h.mu.Lock()
	h.interrupted = nil
	h.mu.Unlock()
}

// Close ends every subscriber with ErrClosed (after what it had queued) and
// drops every ring. Later subscribers are closed at once and later
// publishes are ignored.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	for _, t := range h.topics {
		h.kill(t)
	}
	h.topics = nil
	for _, t := range h.idle {
		t.idx = -1
	}
	h.idle = nil
}

// Stats returns the current size of the hub.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	n := len(h.topics)
	h.mu.Unlock()
	return Stats{
		Topics:      n,
		Subscribers: int(h.subs.Load()),
		RingRecords: int(h.ringRecords.Load()),
		RingBytes:   int(h.ringBytes.Load()),
	}
}

// idleHeap orders topics without subscribers by their last publish.
type idleHeap []*topic

func (q idleHeap) Len() int           { return len(q) }
func (q idleHeap) Less(i, j int) bool { return q[i].pubSeq < q[j].pubSeq }
func (q idleHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].idx = i
	q[j].idx = j
}
func (q *idleHeap) Push(x any) {
	t := x.(*topic)
	t.idx = len(*q)
	*q = append(*q, t)
}
func (q *idleHeap) Pop() any {
	old := *q
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.idx = -1
	*q = old[:len(old)-1]
	return t
}
