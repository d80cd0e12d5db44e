package api

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/coder/websocket"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/hub"
)

// Reasons of end frames.
const (
	wsRunFinished     = "run_finished"
	wsMessageFinished = "message_finished"
	wsUnsubscribed    = "unsubscribed"
	wsThreadDeleted   = "thread_deleted"
	wsSlowConsumer    = "slow_consumer"
	wsShutdown        = "shutdown"
	wsTokenExpired    = "token_expired"
	wsError           = "error"
)

// wsCloseTokenExpired is the close code of a socket whose token expired.
const wsCloseTokenExpired websocket.StatusCode = 4001

// wsSub is one subscription of a socket.
type wsSub struct {
	id     string
	es     *engine.Subscription
	prefix []byte // {"op":"event","id":<id>,"event":

	once   sync.Once
	halt   chan struct{} // closed by stop
	reason string        // why halt was closed; set before
	done   chan struct{} // closed when the goroutine has ended
	// ctx is the socket's, also ended by stop: a read of the log that
	// the store does not answer is given up when the subscription is
	// stopped, rather than hold up the unsubscribe (and so the socket's
	// reader) or the socket's close for as long as the store takes.
	ctx    context.Context
	cancel context.CancelFunc
	// first are the subscribed frame and, when due, the snapshot's: built
	// by the subscribe, whose goroutine has the stack for encoding them,
	// and queued by follow, which then drops them.
	first [2][]byte
}

func newWSSub(ctx context.Context, id string, es *engine.Subscription, heartbeat time.Duration) *wsSub {
	sub := &wsSub{
		id: id, es: es, prefix: []byte(`{"op":"event","id":` + jsonOf(id) + `,"event":`),
		halt: make(chan struct{}), done: make(chan struct{}),
	}
	sub.ctx, sub.cancel = context.WithCancel(ctx)
	sub.first[0] = subscribedFrame(id, es, heartbeat)
	if es.Snapshot != nil {
		sub.first[1] = snapshotFrame(id, es.Snapshot)
	}
	return sub
}

// stop asks the subscription's goroutine to end with reason. It is called
// under the socket's mu, with the subscription's removal from its map.
func (sub *wsSub) stop(reason string) {
	sub.once.Do(func() {
		sub.reason = reason
		close(sub.halt)
		sub.cancel()
	})
}

// follow moves a subscription's frames to the queue: subscribed, the
// snapshot when due, every event, and an end frame, unless the socket is
// gone. Before each frame it waits for room in the queue; meanwhile the
// engine subscription buffers, up to the hub's per-subscriber bound, and a
// subscription that falls further behind is cut there (hub.ErrSlow) and
// ended slow_consumer. So the queue stays bounded, and only the
// subscriptions that cannot keep up are ended, not every one that happens
// to queue a frame when the queue is full.
func (wc *wsConn) follow(sub *wsSub) {
	defer wc.finish(sub)
	// A quiet subscription's goroutine mostly waits: what it does first
	// (its first frames, the catch-up, which may read the store) runs
	// aside, and the loop keeps a small frame, so that it keeps a small
	// stack (see Server.aside).
	resume, ok := wc.beginAside(sub)
	if !ok {
		return
	}
	live := false
	for {
		step := stepCaughtUp
		if live {
			step = wc.forward(sub, &resume)
		} else {
			step = wc.forwardAside(sub, &resume)
		}
		switch step {
		case stepEnded:
			return
		case stepMore:
			continue
		}
		live = true
		select {
		case <-sub.halt:
			wc.end(sub, sub.reason, resume)
			return
		case <-wc.ctx.Done():
			return
		case <-sub.es.Ready():
		}
	}
}

// finish ends a subscription's goroutine: the engine's subscription is
// closed, the socket forgets it, and whoever waits for it goes on.
func (wc *wsConn) finish(sub *wsSub) {
	sub.cancel()
	sub.es.Close()
	wc.forget(sub)
	close(sub.done)
	wc.subWG.Done()
}

// beginAside is begin, aside.
//
//go:noinline
func (wc *wsConn) beginAside(sub *wsSub) (resume tether.Offset, ok bool) {
	if !wc.s.aside(func() { resume, ok = wc.begin(sub) }) {
		return "", false
	}
	return resume, ok
}

// forwardAside is forward, aside.
//
//go:noinline
func (wc *wsConn) forwardAside(sub *wsSub, resume *tether.Offset) (step int) {
	if !wc.s.aside(func() { step = wc.forward(sub, resume) }) {
		return stepEnded
	}
	return step
}

// begin queues the subscribed frame and, when due, the snapshot's, and
// returns the cursor after them; false if the subscription ended first.
func (wc *wsConn) begin(sub *wsSub) (resume tether.Offset, ok bool) {
	// resume is the cursor after everything queued: the last event queued,
	// or past it the last one the filters skipped.
	resume = sub.es.Scanned()
	subscribed, snapshot := sub.first[0], sub.first[1]
	sub.first = [2][]byte{}
	wc.out.push(wsFrame{head: subscribed})
	// Until its snapshot is queued, a subscription has no cursor to resume
	// from (its end has no offset): the client subscribes again without.
	if snapshot != nil && !wc.put(sub, wsFrame{head: snapshot}, "") {
		return resume, false
	}
	return resume, true
}

// forward queues the records that are ready, each once there is room, and
// the end frame when they end; resume follows what is queued.
//
//go:noinline
func (wc *wsConn) forward(sub *wsSub, resume *tether.Offset) int {
	select {
	case <-sub.halt:
		wc.end(sub, sub.reason, *resume)
		return stepEnded
	case <-wc.ctx.Done():
		return stepEnded
	default:
	}
	es := sub.es
	recs, err := es.TryNext(sub.ctx)
	for _, rec := range recs {
		if !wc.put(sub, wsFrame{head: sub.prefix, event: rec.Data}, *resume) {
			return stepEnded
		}
		*resume = rec.Offset
	}
	// Past what was queued: what the filters skipped, also when they
	// skipped all of it (the records were then none, or just the end).
	*resume = es.Scanned()
	if err != nil {
		if sub.ctx.Err() != nil {
			// Stopped while it read (or the socket is gone): the read
			// was given up.
			if wc.ctx.Err() == nil {
				wc.end(sub, sub.reason, *resume)
			}
			return stepEnded
		}
		if reason := wc.endReason(sub, err); reason != "" {
			wc.end(sub, reason, *resume)
		}
		return stepEnded
	}
	if len(recs) > 0 {
		return stepMore
	}
	return stepCaughtUp
}

// put queues f once there is room. If the subscription is stopped
// meanwhile it queues the end frame instead; it returns false then and when
// the socket is gone.
func (wc *wsConn) put(sub *wsSub, f wsFrame, resume tether.Offset) bool {
	if wc.out.put(wc.ctx, sub.halt, f) {
		return true
	}
	if wc.ctx.Err() == nil {
		wc.end(sub, sub.reason, resume)
	}
	return false
}

// endReason says why a subscription's records ended with err, or "" when
// the socket is gone (nothing to tell).
func (wc *wsConn) endReason(sub *wsSub, err error) string {
	switch {
	case errors.Is(err, io.EOF):
		if sub.es.MessageID != "" {
			return wsMessageFinished
		}
		return wsRunFinished
	case errors.Is(err, hub.ErrSlow):
		wc.s.metrics.slowCuts.Inc()
		return wsSlowConsumer
	case wc.ctx.Err() != nil:
		return ""
	}
	// The thread was deleted (which closes its subscriptions, or fails a
	// read of its history under way), or the engine is closing.
	select {
	case <-wc.s.shutdown:
		return wsShutdown
	default:
	}
	// Closed, and not by shutdown: by the thread's deletion, as the SSE
	// stream reads it. (Not from a look in the store: a thread of the same
	// ID may already have been created again.)
	if errors.Is(err, hub.ErrClosed) {
		return wsThreadDeleted
	}
	if !wc.s.e.Following() {
		// Cut off from the log (logged once by the engine): the socket
		// closes too (writeLoop), and a look in the store would wait for
		// the same outage.
		return wsError
	}
	if _, terr := wc.s.e.Thread(sub.ctx, sub.es.ThreadID); tether.CodeOf(terr) == tether.CodeNotFound {
		return wsThreadDeleted
	}
	wc.s.log.Warn("websocket subscription ended", "request_id", wc.reqID, "id", sub.id,
		"thread", sub.es.ThreadID, "err", err)
	return wsError
}

// end queues a subscription's end frame. It is queued even when the queue
// is full: it is small and comes once per subscription.
//
// The socket forgets the id in the same step: a client may use it again as
// soon as it reads the end, and a subscribe that finds it free has the end
// queued before its own frames.
//
// Whichever comes first under wc.mu decides the reason: this end, or a
// stop (an unsubscribe, the socket's close), which takes the subscription
// out of the socket's map in the same step. A subscription that reaches
// its own end (run_finished, …) while an unsubscribe waits for it ends
// unsubscribed, so that the unsubscribe has its answer; one whose end came
// first is no longer open, and the unsubscribe is answered not_found.
func (wc *wsConn) end(sub *wsSub, reason string, resume tether.Offset) {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	if wc.subs[sub.id] == sub {
		delete(wc.subs, sub.id)
	} else {
		select {
		case <-sub.halt:
			reason = sub.reason
		default:
		}
	}
	wc.out.push(wsFrame{head: []byte(jsonOf(struct {
		Op     string        `json:"op"`
		ID     string        `json:"id"`
		Reason string        `json:"reason"`
		Offset tether.Offset `json:"offset,omitempty"`
	}{"end", sub.id, reason, resume}))})
}

// subscribedFrame says what a subscription follows and from where, and
// the socket's heartbeat (as SSE's connected does), by which a client
// tells a dead socket from a quiet one.
func subscribedFrame(id string, es *engine.Subscription, heartbeat time.Duration) []byte {
	return []byte(jsonOf(struct {
		Op          string        `json:"op"`
		ID          string        `json:"id"`
		ThreadID    string        `json:"thread_id"`
		RunID       string        `json:"run_id,omitempty"`
		MessageID   string        `json:"message_id,omitempty"`
		Offset      tether.Offset `json:"offset"`
		HeartbeatMs int64         `json:"heartbeat_ms"`
	}{"subscribed", id, es.ThreadID, es.RunID, es.MessageID, es.Tail, heartbeat.Milliseconds()}))
}

// snapshotFrame is {"op":"snapshot","id":…, followed by the snapshot's
// own fields.
func snapshotFrame(id string, snap *tether.Snapshot) []byte {
	body := jsonOf(snap)
	b := make([]byte, 0, len(body)+len(id)+32)
	b = append(b, `{"op":"snapshot","id":`...)
	b = append(b, jsonOf(id)...)
	if len(body) > 2 { // a snapshot always has fields; be safe anyway
		b = append(b, ',')
	}
	return append(b, body[1:]...)
}
