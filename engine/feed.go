package engine

import "github.com/tetherhq/tether/store"

// A node on a store shared by several nodes (natsstore) hears of every
// commit through its feed of the store's log. Cut off from it (its link
// to NATS down for longer than the store's request timeout), the node
// would keep its streams open and silent, pings and all, while the other
// nodes go on: a client could not tell it is missing the run. So the
// store tells the engine (store.Feed), and until the feed is back every
// subscription ends with errNoFeed (unavailable) and no new one starts:
// clients resume from their offset, on a node that follows the log.
//
// A cut-off so long that the log may no longer hold what the node missed
// (a deleted thread's tombstone expired: store.FeedState.Forget) leaves
// the node unable to tell which of the threads it holds were deleted: it
// forgets them all, and reads each from the store again on its next use,
// as after an eviction.

// Following reports whether this node follows the store's log (always, on
// a store of one node): /readyz says so, so that a load balancer sends the
// clients of a node cut off from it elsewhere.
func (e *Engine) Following() bool {
	select {
	case <-e.FeedLost():
		return false
	default:
		return true
	}
}

// FeedLost returns a channel closed while this node cannot follow the
// store's log (a new one once it follows it again): a WebSocket, which
// holds many subscriptions, is closed then, so that its client opens the
// next one on a node that follows the log.
func (e *Engine) FeedLost() <-chan struct{} { return *e.feedLost.Load() }

// feedChanged is the store's report of its feed of the log (only on a
// change: store.Feed).
func (e *Engine) feedChanged(f store.FeedState) {
	if f.Following {
		if f.Forget {
			// Before streams start again: none may start from what this
			// node held, which may be a thread deleted meanwhile.
			n := e.forgetAll()
			e.log.Warn("following the store's log again after a cut-off long enough to have missed deletions: the threads held in memory are read from the store again", "threads", n)
		}
		lost := make(chan struct{})
		e.feedLost.Store(&lost)
		e.hub.Resume()
		e.log.Info("following the store's log again: streams start again")
		return
	}
	e.log.Warn("cannot follow the store's log: this node's streams end with reconnect (unavailable) until it can")
	close(*e.feedLost.Load())
	e.hub.Interrupt(errNoFeed)
}

// forgetAll drops every thread from memory, loaded, loading or being
// written to (as after another node's deletion: a write queued on a
// dropped state fails in the store if the thread is gone), and the hub's
// rings of the threads nobody follows. It returns how many threads it
// dropped.
func (e *Engine) forgetAll() int {
	e.mu.Lock()
	n := len(e.threads)
	for _, t := range e.threads {
		e.drop(t)
	}
	e.mu.Unlock()
	e.hub.DropIdle()
	return n
}
