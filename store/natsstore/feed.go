package natsstore

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tetherhq/tether/store"
)

// The node's feed of the log (notify.go) is how it hears of every commit,
// its own and the other nodes'. It breaks when the node's connection to
// NATS does (the consumer waits, without an error, for the connection to
// come back) or when the consumer cannot be made again (restartNotify).
// A node cut off from NATS for longer than a blip would otherwise keep
// its clients' streams open and silent, pings and all, for as long as
// the partition lasts, while the other nodes go on: so once the feed has
// been broken for Options.Timeout, the function SetFeedNotify set is told
// (the engine ends its streams, which resume on a node that follows the
// log), and told again once the feed works.
//
// A deleted thread's tombstone stays in the log for Options.TombstoneTTL;
// a node that follows the log again after a cut-off that long would not
// hear of the deletion, and would serve the thread from memory. So a
// cut-off of half of it or more (the other half covers the time the node
// took to notice the cut, and its catch-up on what it missed) is reported
// with Forget: the engine then reads every thread from the store again.

// feed tracks whether the node follows the log.
type feed struct {
	timeout time.Duration
	forget  time.Duration // a cut-off this long is reported with Forget

	mu       sync.Mutex
	fn       func(store.FeedState)
	conn     bool      // the connection is down
	consumer bool      // the consumer cannot be made again
	since    time.Time // when it broke, on the wall clock
	gen      uint64
	timer    *time.Timer
	lost     bool // reported to fn
	closed   bool
}

// update applies change (to conn or consumer, under the lock) and reports
// what follows from it.
func (f *feed) update(change func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	was := f.conn || f.consumer
	change()
	broken := f.conn || f.consumer
	switch {
	case f.closed:
	case broken && !was:
		// The wall clock: a monotonic one may stand still while the
		// machine sleeps, and tombstones expire meanwhile.
		f.since = time.Now().Round(0)
		f.gen++
		gen := f.gen
		f.timer = time.AfterFunc(f.timeout, func() { f.expire(gen) })
	case !broken && was:
		if f.timer != nil {
			f.timer.Stop()
			f.timer = nil
		}
		if f.lost {
			f.lost = false
			if f.fn != nil {
				f.fn(store.FeedState{Following: true, Forget: time.Now().Round(0).Sub(f.since) >= f.forget})
			}
		}
	}
}

// expire reports the feed lost if it is still broken since the break that
// started timer gen.
func (f *feed) expire(gen uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || gen != f.gen || f.lost || !(f.conn || f.consumer) {
		return
	}
	f.lost = true
	if f.fn != nil {
		f.fn(store.FeedState{})
	}
}

// close stops reporting.
func (f *feed) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
}

// SetFeedNotify implements store.Feed.
func (s *Store) SetFeedNotify(fn func(store.FeedState)) {
	s.feed.mu.Lock()
	defer s.feed.mu.Unlock()
	s.feed.fn = fn
	if fn != nil && s.feed.lost {
		fn(store.FeedState{})
	}
}

// watchConn follows the connection's status into the feed's, until Close.
func (s *Store) watchConn() {
	defer close(s.watchDone)
	ch := s.nc.StatusChanged(nats.CONNECTED, nats.RECONNECTING, nats.DISCONNECTED, nats.CLOSED)
	defer s.nc.RemoveStatusListener(ch)
	check := func() {
		down := !s.nc.IsConnected()
		s.feed.update(func() { s.feed.conn = down })
	}
	check()
	for {
		select {
		case <-s.stop:
			return
		case _, ok := <-ch:
			if !ok {
				return
			}
			// The status now, not the event's: events are dropped when
			// the channel is full.
			check()
		}
	}
}
