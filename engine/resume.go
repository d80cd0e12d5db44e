package engine

import (
	"context"
	"errors"
	"hash/maphash"
	"sync/atomic"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// A client that resumes a thread's stream (or a run's, while the run goes
// on) from its last offset needs none of the thread's state: that the
// thread exists, that the offset is an event of its log, and the log after
// it. On a node that has not loaded the thread (after a restart, or an
// eviction), such a subscription is made from the store's indexed reads
// and the hub alone, so a resume costs the same whatever the log's length;
// loading the thread (from its checkpoint and the log after it) is left to
// what needs its state.

// errNeedLoad says a subscription needs the thread's state after all.
var errNeedLoad = errors.New("engine: the subscription needs the thread's state")

// delSeed hashes thread IDs onto Engine.delGen.
var delSeed = maphash.MakeSeed()

// delGen returns the counter of deletes of threads whose ID hashes like
// id's: DeleteThread and deletedElsewhere bump it before they close the
// thread's subscribers.
func (e *Engine) delGen(id string) *atomic.Uint64 {
	return &e.deletes[maphash.String(delSeed, id)%uint64(len(e.deletes))]
}

// subscribeCold subscribes to a whole thread, or to a run that has not
// finished, from an offset, OffsetStart or OffsetNow, without loading the
// thread. It returns errNeedLoad when it cannot: the thread is loaded
// (which is cheaper), the cursor is not in the log, or the run is unknown
// to the store or finished (whether it ended before the cursor takes the
// state).
//
// A delete racing it is caught either way: one in flight when it starts
// makes the thread not_found; one that starts while it sets up bumps the
// thread's delete counter, which it checks after registering with the hub
// (it then starts over); one that starts later closes it with the
// thread's other subscribers.
func (e *Engine) subscribeCold(ctx context.Context, req SubscribeRequest) (*Subscription, error) {
	id := req.ThreadID
	if req.RunID != "" {
		rr, err := e.st.Run(ctx, req.RunID)
		if err != nil || rr.Run.Status.Terminal() || (id != "" && rr.Run.ThreadID != id) {
			return nil, errNeedLoad
		}
		id = rr.Run.ThreadID
		if e.cached(id) != nil {
			return nil, errNeedLoad
		}
	}
	if !tether.ValidID(id) {
		return nil, notFound(id)
	}
	gen := e.delGen(id)
	e.mu.Lock()
	deleting := e.deleting[id] > 0
	seen := gen.Load()
	e.mu.Unlock()
	if deleting {
		return nil, notFound(id)
	}

	from := req.Cursor
	switch from {
	case tether.OffsetStart:
	case tether.OffsetNow:
		tr, err := e.st.Thread(ctx, id)
		if err != nil {
			return nil, e.storeErr(err, "thread %s", id)
		}
		from = tr.Thread.LastOffset
	default:
		// One indexed read: the offset is an event of this thread's log
		// (of its current incarnation), so the thread exists.
		_, err := e.st.ReadEvents(ctx, id, from, 1)
		if errors.Is(err, store.ErrOffsetNotFound) {
			return nil, errNeedLoad
		}
		if err != nil {
			return nil, e.storeErr(err, "thread %s", id)
		}
	}
	sub := e.hub.Subscribe(id, from)
	// Read after registering: what was committed before is in the row,
	// what is committed after reaches the subscriber.
	tr, err := e.st.Thread(ctx, id)
	if err != nil {
		sub.Close()
		return nil, e.storeErr(err, "thread %s", id)
	}
	if req.RunID != "" {
		// Read after registering too: a run that had not finished then
		// finishes after it, so its run.finished reaches the subscriber
		// (which then ends).
		rr, err := e.runRecord(ctx, id, req.RunID)
		if err != nil || rr.Run.Status.Terminal() {
			sub.Close()
			return nil, errNeedLoad
		}
	}
	e.mu.Lock()
	deleting = e.deleting[id] > 0
	e.mu.Unlock()
	if deleting || gen.Load() != seen {
		sub.Close()
		return nil, errRetired
	}
	s := &Subscription{ThreadID: sub.ThreadID(), RunID: req.RunID, Tail: tr.Thread.LastOffset, e: e, sub: sub, scanned: from}
	if len(req.Types) > 0 {
		s.types = make(map[string]bool, len(req.Types))
		for _, ty := range req.Types {
			s.types[ty] = true
		}
	}
	e.counters.Subscriptions.Add(1)
	return s, nil
}

// threadIDOf returns the thread a subscription request follows, as far as
// this node knows without reading the store ("" if it does not).
func (e *Engine) threadIDOf(req SubscribeRequest) string {
	if req.RunID == "" {
		return req.ThreadID
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[req.RunID]
}

// tipTimeout bounds the store read of coldTip.
const tipTimeout = 5 * time.Second

// coldTip returns the thread's last committed offset, for a subscription
// made without loading the thread: from its state if it is loaded now,
// else from the store.
func (s *Subscription) coldTip() tether.Offset {
	if t := s.e.cached(s.ThreadID); t != nil {
		t.rmu.Lock()
		defer t.rmu.Unlock()
		return t.state.Offset()
	}
	ctx, cancel := context.WithTimeout(context.Background(), tipTimeout)
	defer cancel()
	tr, err := s.e.st.Thread(ctx, s.ThreadID)
	if err != nil {
		return s.Tail
	}
	return tr.Thread.LastOffset
}
