package hub

import (
	"context"
	"fmt"
	"sync"

	tether "github.com/tetherhq/tether"
)

// Subscriber receives the records of one thread after an offset, in order,
// each once: first those it missed (from the ring or History), then live
// ones. Next and TryNext must be called by one goroutine at a time; Offset,
// Ready and Close may be called from any goroutine.
type Subscriber struct {
	hub    *Hub
	thread string
	ready  chan struct{}

	topic *topic // guarded by Hub.mu; nil once closed
	idx   int    // index in topic.subs, -1 if absent; guarded by topic.mu

	mu  sync.Mutex
	pos tether.Offset // offset of the last record returned

	// queue is the log segment (pos, tail] ready to be returned.
	queue  []*tether.Record
	qBytes int
	spare  []*tether.Record // the slice last returned by Next, reused next time
	tail   tether.Offset

	// In catch-up, the log after tail must first be read from History;
	// published records wait in pending, the log segment (pendBase, end of
	// pending], until History reaches pendBase.
	catchup  bool
	pending  []*tether.Record
	pendBase tether.Offset
	pBytes   int

	err    error // ErrSlow or ErrClosed, returned once queue is empty
	closed bool  // Close was called
}

// attach fills the subscriber from the ring when the ring covers its
// cursor, and otherwise sets it to catch up from History. topic.mu and s.mu
// are held: no publish can come in between.
//
// It queues at most half the buffer, leaving room for what is published
// before the first Next; the rest, if any, is read from History rather than
// cutting a subscriber that has had no chance to read.
func (s *Subscriber) attach(r *ring) {
	i, ok := r.find(s.tail)
	if !ok {
		s.catchup = true
		return
	}
	maxN, maxBytes := s.hub.opts.BufferEvents/2, s.hub.opts.BufferBytes/2
	if i < r.n {
		s.queue = make([]*tether.Record, 0, min(r.n-i, maxN))
	}
	for ; i < r.n; i++ {
		rec := r.at(i)
		if len(s.queue)+1 > maxN || s.qBytes+rec.Size() > maxBytes {
			s.catchup = true
			break
		}
		s.queue = append(s.queue, rec)
		s.qBytes += rec.Size()
		s.tail = rec.Offset
	}
}

// deliver gives s a published batch (recs after offset before, size bytes).
// topic.mu is held. It returns false if s no longer takes records (cut,
// ended or closed) and must be detached.
func (s *Subscriber) deliver(before tether.Offset, recs []*tether.Record, size int) bool {
	s.mu.Lock()
	ok := s.deliverLocked(before, recs, size)
	s.mu.Unlock()
	s.signal()
	return ok
}

func (s *Subscriber) deliverLocked(before tether.Offset, recs []*tether.Record, size int) bool {
	if s.err != nil || s.closed {
		return false
	}
	if !s.catchup && before.Compare(s.tail) > 0 {
		// A gap: records between tail and before were committed but never
		// reached this subscriber. Fetch them from History.
		s.catchup = true
	}
	if s.catchup {
		if len(s.pending) == 0 || before != s.pending[len(s.pending)-1].Offset {
			// Start pending anew at this batch. Anything dropped was
			// committed, so History will return it.
			clear(s.pending)
			s.pending, s.pBytes, s.pendBase = s.pending[:0], 0, before
		}
		if s.overflows(len(recs), size) {
			return false
		}
		s.pending = append(s.pending, recs...)
		s.pBytes += size
		return true
	}
	// Live: the batch covers the log after before, and before <= tail, so
	// what follows tail in it follows tail in the log.
	if recs[0].Offset.Compare(s.tail) <= 0 {
		i := 0
		for i < len(recs) && recs[i].Offset.Compare(s.tail) <= 0 {
			i++
		}
		recs = recs[i:]
		if len(recs) == 0 {
			return true
		}
		size = 0
		for _, r := range recs {
			size += r.Size()
		}
	}
	if s.overflows(len(recs), size) {
		return false
	}
	s.queue = append(s.queue, recs...)
	s.qBytes += size
	s.tail = recs[len(recs)-1].Offset
	return true
}

// overflows cuts s with ErrSlow if n more records of size bytes would
// exceed its buffer. s.mu is held.
//
// A subscriber with nothing queued takes the batch whatever its size: it
// is not behind, and one append larger than the buffer (an event may be as
// large as the buffer, a batch several times that) would otherwise cut
// every reader of the thread, however fast. The records are shared, so
// what a subscriber holds is still bounded: its buffer, or one batch.
func (s *Subscriber) overflows(n, size int) bool {
	opts := &s.hub.opts
	if len(s.queue)+len(s.pending) == 0 {
		return false
	}
	if len(s.queue)+len(s.pending)+n <= opts.BufferEvents && s.qBytes+s.pBytes+size <= opts.BufferBytes {
		return false
	}
	s.endLocked(ErrSlow)
	return true
}

// end stops s taking records; err comes after what is queued.
func (s *Subscriber) end(err error) {
	s.mu.Lock()
	s.endLocked(err)
	s.mu.Unlock()
	s.signal()
}

func (s *Subscriber) endLocked(err error) {
	if s.err != nil {
		return
	}
	s.err = err
	s.catchup = false
	s.pending, s.pBytes = nil, 0
}

// maxSpare bounds the slice kept for reuse, so that one burst does not pin
// a large array for the life of the subscriber.
const maxSpare = 1024

// recycle returns the slice returned by the previous Next, emptied, as the
// next queue, and keeps the current queue as the next spare. s.mu is held.
func (s *Subscriber) recycle() []*tether.Record {
	next := s.spare
	s.spare = s.queue
	if cap(s.spare) > maxSpare {
		s.spare = nil
	}
	clear(next) // a caller that kept it sees nils, not wrong records
	return next[:0]
}

func (s *Subscriber) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Next returns the next records of the thread, in order, waiting until
// there are some. It returns everything queued at once, so that the caller
// can write them all and flush once. The slice is valid until the next call
// to Next or TryNext, which reuses it (this halves the cost of a fan-out);
// the records stay valid, are shared and must not be modified.
//
// It returns ErrSlow once the subscriber was cut (after the records queued
// before the cut), ErrClosed once it or its thread or the hub was closed,
// ctx.Err() if ctx ends while it waits, and History's error (wrapped) if a
// read of missed records fails; after a History error or ctx.Err() a later
// call tries again.
func (s *Subscriber) Next(ctx context.Context) ([]*tether.Record, error) {
	return s.next(ctx, true)
}

// TryNext is Next without the wait: it returns (nil, nil) at once when no
// record is ready. While the subscriber catches up it reads one page of
// History per call, bounded by ctx.
func (s *Subscriber) TryNext(ctx context.Context) ([]*tether.Record, error) {
	return s.next(ctx, false)
}

func (s *Subscriber) next(ctx context.Context, wait bool) ([]*tether.Record, error) {
	for {
		s.mu.Lock()
		switch {
		case s.closed:
			s.mu.Unlock()
			return nil, ErrClosed
		case len(s.queue) > 0:
			recs := s.queue
			s.queue, s.qBytes = s.recycle(), 0
			s.pos = s.tail
			more := s.catchup || s.err != nil
			s.mu.Unlock()
			if more {
				s.signal()
			}
			return recs, nil
		case s.err != nil:
			err := s.err
			s.mu.Unlock()
			return nil, err
		case s.catchup:
			s.mu.Unlock()
			recs, err := s.catchUp(ctx)
			if err != nil || len(recs) > 0 || !wait {
				return recs, err
			}
			continue
		}
		s.mu.Unlock()
		if !wait {
			return nil, nil
		}
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// catchUp reads one page of History after tail and returns it, followed by
// the pending records when History has reached them.
//
// Why no record is lost or repeated (see the package documentation): every
// batch published after the subscriber registered is in pending (or was
// replaced by a later batch after a gap, in which case it is committed and
// in History); every batch published before is committed, so History has
// it. Once History has reached pendBase, pending continues the log without
// a gap; records it shares with History are dropped by offset.
func (s *Subscriber) catchUp(ctx context.Context) ([]*tether.Record, error) {
	s.mu.Lock()
	after := s.tail
	waiting := s.pendBase // History must reach it, if pending is not empty
	if len(s.pending) == 0 {
		waiting = ""
	}
	s.mu.Unlock()

	page, more, err := s.hub.history(ctx, s.thread, after, s.hub.opts.HistoryPage, s.hub.opts.HistoryBytes)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("read history: %w", err)
	}
	// The end of the log is what History says, not a short page: a page is
	// cut short by bytes with the log going on. An empty page is the end
	// whatever it says, so that a History that breaks its contract cannot
	// make s spin.
	end := !more || len(page) == 0
	prev := after
	for _, r := range page {
		if r.Offset.Compare(prev) <= 0 {
			return nil, fmt.Errorf("read history: offset %s after %s is out of order", r.Offset, prev)
		}
		prev = r.Offset
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	out := page[:len(page):len(page)] // appending copies
	if len(out) > 0 {
		s.tail = out[len(out)-1].Offset
		s.pos = s.tail
	}
	if s.err != nil || !s.catchup {
		// Cut or ended while reading: the page still continues what was
		// returned; the error comes next.
		s.signal()
		return out, nil
	}
	switch {
	case len(s.pending) > 0 && s.pendBase.Compare(s.tail) <= 0:
		for _, r := range s.pending {
			if r.Offset.Compare(s.tail) > 0 {
				out = append(out, r)
			}
		}
		if len(out) > 0 {
			s.tail = out[len(out)-1].Offset
			s.pos = s.tail
		}
		s.pending, s.pBytes, s.catchup = nil, 0, false
	case len(s.pending) == 0 && end:
		// History was at its end after registration and nothing has been
		// published since: every later record will be published to s.
		s.catchup = false
	case end && len(page) == 0 && waiting != "" && s.tail.Compare(waiting) < 0:
		// pending was published before this read, so the record at
		// pendBase was committed; History not returning it breaks its
		// contract. Do not spin on it.
		s.signal()
		return nil, fmt.Errorf("read history: thread %s ends at %s, before published offset %s", s.thread, s.tail, waiting)
	}
	if s.catchup {
		s.signal()
	}
	return out, nil
}

// Ready returns a channel that receives a value when Next would not block
// (records are queued, History is to be read, or an error is due). It may
// fire spuriously, so a select loop calls TryNext (or Next) and waits again
// when that returns nothing.
func (s *Subscriber) Ready() <-chan struct{} { return s.ready }

// Behind reports whether records already follow the last ones Next
// returned: queued, or still to be read from History (the subscriber is
// catching up). A reader that tells its client whether it has reached the
// tail asks it after each Next.
func (s *Subscriber) Behind() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue) > 0 || s.catchup
}

// ThreadID returns the thread the subscriber follows.
func (s *Subscriber) ThreadID() string { return s.thread }

// Offset returns the offset of the last record returned (at first, the
// cursor the subscriber started from): the cursor to resume from after
// ErrSlow.
func (s *Subscriber) Offset() tether.Offset {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pos
}

// Close detaches the subscriber and releases its buffer. Next then returns
// ErrClosed. Close may be called more than once and concurrently with
// Next, which it wakes.
func (s *Subscriber) Close() {
	s.hub.release(s)
	s.mu.Lock()
	s.closed = true
	s.queue, s.qBytes, s.spare = nil, 0, nil
	s.pending, s.pBytes = nil, 0
	s.mu.Unlock()
	s.signal()
}
