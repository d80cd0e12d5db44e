package api

import (
	"fmt"
	"runtime/debug"
	"time"
)

// aside runs f on a goroutine of its own and returns once f has, reporting
// whether f returned (false: it panicked; the panic is logged).
//
// A goroutine starts with a 2 KiB stack and Go doubles it when a call
// needs more; a parked goroutine's stack is shrunk only while it uses less
// than a quarter of it. So a goroutine that lives as long as a connection
// and once ran something deep (a socket write, a store read, JSON) keeps a
// stack of 4 KiB or more for good, though it mostly waits. Running the
// deep part aside leaves the caller's stack as it was, for the price of
// starting a goroutine (well under a microsecond). The caller waits, so
// the order is as if f ran in place.
//
// A panic in f is recovered, as net/http recovers one in a handler: f runs
// for one connection, and a bug that one client's input reaches must end
// that connection, not the server.
func (s *Server) aside(f func()) (ok bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("panic serving a connection; it is closed", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			}
		}()
		f()
		ok = true
	}()
	<-done
	return ok
}

// What one step of a stream's or a subscription's loop did with the
// records that were ready: the loop waits, looks again, or ends. The
// steps run aside until the stream is live (the records may come from the
// store), then in place.
const (
	stepCaughtUp = iota // nothing more: wait
	stepMore            // records were written or queued: look again
	stepEnded           // the stream or subscription ended
)

// Why a stream's loop ends on its own, whatever the stream serves: the
// reason of a Tether stream's reconnect frame. Other surfaces end in their
// own way (an AG-UI stream is reset, an AI SDK stream is aborted, or at
// shutdown ends cleanly).
const (
	endShutdown = "shutdown"
	endLifetime = "max_lifetime"
	endExpired  = "token_expired"
)

// endDue reports why a stream started at started (zero: a stream without
// a lifetime, the AI SDK's) and opened by p must end now, or "": p's
// token reached its exp, or a reload removed its key (lapsed). Every stream's loop asks on its beat and
// after each write of what was ready: a stream that always has records
// ready (a thread appended to without pause, a catch-up from far behind,
// a client that reads slowly) does not wait on the beat, and must not
// outlive shutdown, its lifetime or its token for that. The Durable
// Streams handler asks it too (durablestreams.Options.EndDue).
func (s *Server) endDue(started time.Time, p Principal) string {
	select {
	case <-s.shutdown:
		return endShutdown
	default:
	}
	if !started.IsZero() && time.Since(started) >= s.opts.MaxStreamLifetime {
		return endLifetime
	}
	if s.lapsed(p) {
		return endExpired
	}
	return ""
}
