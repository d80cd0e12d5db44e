package api

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	tether "github.com/tetherhq/tether"
)

// wsQueueBytes bounds each socket's outbound queue (frames queued or being
// written). A variable so that tests can make it small.
var wsQueueBytes atomic.Int64

func init() { wsQueueBytes.Store(1 << 20) }

// wsFrame is one outbound message: head alone, or for an event head (the
// subscription's prefix) + event (the record's JSON, shared by every
// subscriber, never re-encoded) + "}".
type wsFrame struct {
	head  []byte
	event []byte
}

func (f wsFrame) size() int {
	if f.event == nil {
		return len(f.head)
	}
	return len(f.head) + len(f.event) + 1
}

// wsQueue is a socket's outbound queue, bounded in bytes: snapshots and
// events wait for room (put); only small frames, bounded in number, are
// queued regardless (push).
type wsQueue struct {
	limit int
	wake  chan struct{} // signals the writer; capacity 1

	mu     sync.Mutex
	frames []wsFrame
	bytes  int           // queued, or taken and not yet written
	room   chan struct{} // closed when bytes drop below limit/2; nil if no one waits
}

func newWSQueue(limit int) *wsQueue {
	return &wsQueue{limit: limit, wake: make(chan struct{}, 1)}
}

// push queues f whatever the queue holds: for frames that are small and
// bounded in number (subscribed, end, answers to commands, which the
// reader holds while the queue is full, and heartbeats).
func (q *wsQueue) push(f wsFrame) {
	q.mu.Lock()
	q.add(f)
	q.mu.Unlock()
}

// put queues f once the queue is below its limit, so that puts take the
// queue over its limit by one frame at most. It returns false, and queues nothing, if
// stop is closed or ctx ends first.
func (q *wsQueue) put(ctx context.Context, stop <-chan struct{}, f wsFrame) bool {
	if !q.wait(ctx, stop) {
		return false
	}
	q.add(f)
	q.mu.Unlock()
	return true
}

// waitRoom waits until the queue is below its limit. It returns false if
// stop is closed or ctx ends first.
func (q *wsQueue) waitRoom(ctx context.Context, stop <-chan struct{}) bool {
	if !q.wait(ctx, stop) {
		return false
	}
	q.mu.Unlock()
	return true
}

// wait returns true with q.mu held once the queue is below its limit.
func (q *wsQueue) wait(ctx context.Context, stop <-chan struct{}) bool {
	for {
		q.mu.Lock()
		if q.bytes < q.limit {
			return true
		}
		if q.room == nil {
			q.room = make(chan struct{})
		}
		room := q.room
		q.mu.Unlock()
		select {
		case <-room:
		case <-stop:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// add queues f and wakes the writer. q.mu is held.
func (q *wsQueue) add(f wsFrame) {
	q.frames = append(q.frames, f)
	q.bytes += f.size()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take returns every queued frame (in spare's array if it fits); they
// count against the limit until sent reports them written.
func (q *wsQueue) take(spare []wsFrame) []wsFrame {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.frames
	q.frames = spare[:0]
	return out
}

// sent reports n bytes written. Waiters wake once the queue is half empty,
// rather than one frame at a time.
func (q *wsQueue) sent(n int) {
	q.mu.Lock()
	q.bytes -= n
	if q.room != nil && q.bytes < q.limit/2 {
		close(q.room)
		q.room = nil
	}
	q.mu.Unlock()
}

// writeLoop is the socket's only writer of messages. It writes every
// queued frame as its own message, each within the write timeout; a failed
// write ends the socket. At server shutdown it ends every subscription
// (end shutdown), writes what is queued and closes with 1001 (going away).
// It also pings every heartbeat (see ping), on the server's one beat
// rather than a ticker and a goroutine of the socket's own.
func (wc *wsConn) writeLoop() {
	defer wc.bg.Done()
	defer wc.cancel()
	// What the loop keeps is small and its work is in the methods it
	// calls, so that the writer of a quiet socket, which mostly waits,
	// keeps a small stack (see Server.aside).
	w := &wsWriter{pinged: time.Now()}
	for {
		select {
		case <-wc.out.wake:
			if !wc.write(w) {
				return
			}
		case <-wc.s.beat.next():
			if !wc.s.held(wc.p) {
				// A reload removed the socket's key: as at a token's exp.
				wc.closeWith(w, wsTokenExpired, wsCloseTokenExpired, "token_expired")
				return
			}
			wc.onBeat(w)
		case <-wc.ctx.Done():
			return
		case <-wc.s.shutdown:
			wc.closeWith(w, wsShutdown, websocket.StatusGoingAway, "server shutting down")
			return
		case <-wc.s.e.FeedLost():
			// This node cannot follow the log (cut off from NATS): every
			// subscription ends (error, with its offset) and the socket
			// closes with 1013 (try again later), so that the client opens
			// the next one on a node that follows it (/readyz is 503 here).
			wc.closeWith(w, wsError, websocket.StatusTryAgainLater, "not_following_log")
			return
		case <-wc.expired:
			// The token's exp: every subscription ends token_expired, then
			// the socket closes with 4001; the client reconnects with a
			// fresh token and resumes from the offsets of the end frames.
			wc.closeWith(w, wsTokenExpired, wsCloseTokenExpired, "token_expired")
			return
		}
	}
}

// wsQuiet is how long a socket's writer must have been idle for its next
// write to run aside: the frames of a quiet socket (pings, a rare event)
// are written aside, and a busy socket's by its writer, whose stack then
// grows once, rather than a goroutine started per write.
const wsQuiet = time.Second

// write writes what is queued, and reports whether all of it was written.
//
//go:noinline
func (wc *wsConn) write(w *wsWriter) (ok bool) {
	now := time.Now()
	quiet := now.Sub(w.wrote) >= wsQuiet
	w.wrote = now
	if quiet {
		wc.s.aside(func() { ok = w.flush(wc.ctx, wc) })
		return ok
	}
	return w.flush(wc.ctx, wc)
}

// onBeat pings when a ping is due (beat.pingDue).
//
//go:noinline
func (wc *wsConn) onBeat(w *wsWriter) {
	if wc.s.beat.pingDue(&w.pinged, time.Now()) {
		wc.s.aside(wc.ping) // formatting the time is deep too
	}
}

// closeWith ends every subscription with reason, writes what is queued
// (their end frames) and closes the socket with code.
//
//go:noinline
func (wc *wsConn) closeWith(w *wsWriter, reason string, code websocket.StatusCode, text string) {
	wc.stopAll(reason)
	ctx, cancel := context.WithTimeout(wc.ctx, wc.s.opts.WriteTimeout)
	ok := w.flush(ctx, wc)
	cancel()
	if ok {
		_ = wc.c.Close(code, text)
	}
}

// wsWriter holds the writer's reusable buffers and its clock.
type wsWriter struct {
	spare   []wsFrame
	scratch []byte
	// wrote is when the writer last wrote, pinged when it last pinged.
	wrote, pinged time.Time
}

// flush writes every queued frame and reports whether all were written.
func (w *wsWriter) flush(ctx context.Context, wc *wsConn) bool {
	frames := wc.out.take(w.spare)
	ok := true
	for _, f := range frames {
		msg := f.head
		if f.event != nil {
			w.scratch = append(append(append(w.scratch[:0], f.head...), f.event...), '}')
			msg = w.scratch
		}
		wctx, cancel := context.WithTimeout(ctx, wc.s.opts.WriteTimeout)
		err := wc.c.Write(wctx, websocket.MessageText, msg)
		cancel()
		if err != nil {
			ok = false
			break
		}
		wc.out.sent(f.size())
	}
	clear(frames) // drop the references to records
	w.spare = frames[:0]
	if cap(w.spare) > 1024 {
		w.spare = nil
	}
	if cap(w.scratch) > 64<<10 {
		w.scratch = nil // don't keep a large buffer for an idle socket
	}
	return ok
}

// ping queues an app-level ping frame (page code cannot see WebSocket
// control pings, so it watches for these to detect a stalled socket) and
// sends a control ping, unless one still awaits its pong, whose pong must
// come back within the write timeout: that is how a dead peer is detected.
// The control ping waits for its pong in a goroutine of its own, which
// lives only that long, so that the writer goes on meanwhile.
func (wc *wsConn) ping() {
	wc.out.push(wsFrame{head: []byte(`{"op":"ping","ts":"` + tether.Now().Format(tether.TimeLayout) + `"}`)})
	if !wc.pinging.CompareAndSwap(false, true) {
		return
	}
	wc.bg.Add(1)
	go func() {
		defer wc.bg.Done()
		ctx, cancel := context.WithTimeout(wc.ctx, wc.s.opts.WriteTimeout)
		err := wc.c.Ping(ctx)
		cancel()
		if err != nil {
			// No pong in time, or the socket is closing: end it (a close
			// handshake in progress has already sent its frame).
			wc.cancel()
			return
		}
		wc.pinging.Store(false)
	}()
}

func pongFrame(id string) []byte {
	ts := `"ts":"` + tether.Now().Format(tether.TimeLayout) + `"}`
	if id == "" {
		return []byte(`{"op":"pong",` + ts)
	}
	return []byte(`{"op":"pong","id":` + jsonOf(id) + `,` + ts)
}
