package api

import (
	"context"
	"errors"
	"io"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/hub"
)

// The loop of an SSE stream once its first frames are built: it writes what
// the subscription has ready, waits, pings on the server's beat, and ends
// the stream. What it does now and then runs aside (Server.aside), so that
// an idle stream's goroutine keeps a small stack.

// run writes the stream until it ends. ctx is the request's (net/http) or
// none (a taken-over connection, which ends on a write error).
func (st *sseStream) run(ctx context.Context) {
	if !st.sendAside() || st.sub.Done() {
		return
	}
	// What run keeps is small, and the work is in the methods it calls
	// (not inlined), so that a stream parked here needs little stack (see
	// Server.aside).
	clock := streamClock{started: time.Now()}
	clock.pinged = clock.started
	for {
		// Until the stream is live, the records may come from the store
		// (a deep stack): aside.
		step := stepCaughtUp
		if st.unwatch != nil {
			step = st.catchUpAside(ctx)
		} else {
			step = st.catchUp(ctx)
		}
		switch step {
		case stepEnded:
			return
		case stepMore:
			// A stream far behind may catch up for long (the store is
			// read a page at a time, as fast as the client reads), and
			// one whose thread is appended to without pause may never
			// wait: neither shutdown, its lifetime nor the token's exp
			// waits for the beat (endDue).
			if st.mustEnd(clock.started) {
				return
			}
			continue
		}
		// Caught up: what comes next is live, from memory.
		if st.unwatch != nil && !st.goLive(&ctx) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-st.s.shutdown:
			st.endAside("reconnect", `{"reason":"shutdown"}`)
			return
		case <-st.s.beat.next():
			if !st.onBeat(&clock) {
				return
			}
		case <-st.sub.Ready():
		}
	}
}

// mustEnd ends the stream, and reports true, if the server is shutting
// down, the stream's lifetime is over or its token has expired: between
// writes of what was ready, which do not wait on the beat.
//
//go:noinline
func (st *sseStream) mustEnd(started time.Time) bool {
	why := st.s.endDue(started, st.p)
	if why == "" {
		return false
	}
	st.endAside("reconnect", `{"reason":"`+why+`"}`)
	return true
}

// streamClock is when a stream started and last pinged.
type streamClock struct{ started, pinged time.Time }

// catchUp writes everything that is ready (history is read a page at a
// time) in one write: one syscall for many events. It also writes the end
// of the stream when the records end.
//
//go:noinline
func (st *sseStream) catchUp(ctx context.Context) int {
	s, sub := st.s, st.sub
	recs, err := sub.TryNext(ctx)
	st.f.reserve(len(recs) + 1)
	for _, rec := range recs {
		st.f.add(rec.SSE())
	}
	if err != nil {
		switch {
		case errors.Is(err, hub.ErrSlow):
			s.metrics.slowCuts.Inc()
			st.f.event("reconnect", "", `{"reason":"slow_consumer"}`)
		case errors.Is(err, io.EOF):
			st.f.event("end", "", endOf(sub))
		case errors.Is(err, hub.ErrClosed) && !s.stopped():
			st.f.event("end", "", `{"reason":"thread_deleted"}`)
		case !errors.Is(err, hub.ErrClosed) && ctx.Err() == nil:
			s.log.Warn("stream ended", "thread", sub.ThreadID, "err", err, "request_id", st.reqID)
			st.readFailed(err)
		}
		st.send()
		return stepEnded
	}
	if len(recs) == 0 {
		return stepCaughtUp
	}
	if !st.send() {
		return stepEnded
	}
	return stepMore
}

// catchUpAside is catchUp, aside.
//
//go:noinline
func (st *sseStream) catchUpAside(ctx context.Context) (step int) {
	if !st.s.aside(func() { step = st.catchUp(ctx) }) {
		return stepEnded
	}
	return step
}

// goLive stops the watch for the client leaving, once the stream has
// caught up, and drops the context it cancelled: nothing cancels it any
// more, and the store reads of the catch-up derived contexts from it, which
// left it a map of its children, empty but kept (440 bytes of every idle
// stream). It reports false if the client left meanwhile.
//
//go:noinline
func (st *sseStream) goLive(ctx *context.Context) bool {
	if !st.stopWatchingAside() || st.unwatchCtx == nil {
		return true
	}
	if (*ctx).Err() != nil {
		return false
	}
	st.unwatchCtx()
	st.unwatchCtx = nil
	*ctx = context.Background()
	return true
}

// onBeat ends the stream at the end of its lifetime or of its token, and
// pings when one is due (beat.pingDue). It reports whether the stream goes
// on.
//
//go:noinline
func (st *sseStream) onBeat(c *streamClock) bool {
	if st.mustEnd(c.started) {
		return false
	}
	if st.s.beat.pingDue(&c.pinged, time.Now()) {
		return st.pingAside()
	}
	return true
}

// The stream's goroutine waits most of its life. Waiting needs little
// stack, but writing to the socket, setting its deadline, stopping the
// watch or formatting a time needs more than the 2 KiB a goroutine starts
// with, and a parked goroutine's stack is never shrunk back to that. So
// what an idle stream does now and then (its first frames, the end of the
// watch, pings) runs aside (Server.aside), and an idle stream keeps 2 KiB.
// Events are written by the stream's goroutine itself: a goroutine per
// write would cost more than the stack a busy stream needs.

// sendAside is send, aside.
func (st *sseStream) sendAside() (ok bool) {
	if len(st.f.bufs) == 0 {
		return true
	}
	st.s.aside(func() { ok = st.send() })
	return ok
}

// stopWatchingAside is stopWatching, aside.
func (st *sseStream) stopWatchingAside() (stopped bool) {
	if st.unwatch == nil {
		return false
	}
	st.s.aside(func() { stopped = st.stopWatching() })
	return stopped
}

// endAside writes a last event, aside.
func (st *sseStream) endAside(event, data string) {
	st.s.aside(func() {
		st.f.event(event, "", data)
		st.send()
	})
}

// pingAside writes a ping, aside.
func (st *sseStream) pingAside() (ok bool) {
	st.s.aside(func() {
		st.f.event("ping", "", `{"ts":"`+tether.Now().Format(tether.TimeLayout)+`"}`)
		ok = st.send()
	})
	return ok
}
