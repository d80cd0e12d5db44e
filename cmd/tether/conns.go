package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// conns tracks the server's connections for its shutdown, which waits for
// the requests in flight (an append on a slow link) but not for two kinds
// of connection: those that have not sent a byte of a request yet (a
// browser's or a proxy's preconnects, probes), on which
// http.Server.Shutdown would wait up to 5 s each, and those answering with
// an event stream (text/event-stream) that has not ended once every stream
// was told to: their client reads nothing, and the write they are blocked
// in would hold the exit until --write-timeout. Connections the API took
// over (its own streams) are its own, and not tracked. The server speaks
// HTTP/1.1 only, one request at a time per connection: a connection marked
// as a stream carries nothing else.
type conns struct {
	mu  sync.Mutex
	all map[net.Conn]*connInfo
}

type connInfo struct {
	state  http.ConnState // under conns.mu
	stream atomic.Bool    // the request being answered is an event stream
}

type connKey struct{}

func newConns() *conns { return &conns{all: make(map[net.Conn]*connInfo)} }

// serve sets the hooks of hs that track its connections, and wraps its
// handler to note the responses that are event streams.
func (cs *conns) serve(hs *http.Server) {
	hs.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		ci := &connInfo{}
		cs.mu.Lock()
		cs.all[c] = ci
		cs.mu.Unlock()
		return context.WithValue(ctx, connKey{}, ci)
	}
	hs.ConnState = func(c net.Conn, state http.ConnState) {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		ci := cs.all[c]
		switch {
		case ci == nil:
		case state == http.StateClosed || state == http.StateHijacked:
			delete(cs.all, c)
		default:
			ci.state = state
			if state == http.StateIdle {
				ci.stream.Store(false)
			}
		}
	}
	h := hs.Handler
	hs.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ci, _ := r.Context().Value(connKey{}).(*connInfo)
		if ci == nil {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(&streamNoter{ResponseWriter: w, ci: ci}, r)
	})
}

// closeUnwaited closes the connections shutdown does not wait for: those
// that have sent nothing, and those still answering with an event stream.
func (cs *conns) closeUnwaited() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for c, ci := range cs.all {
		if ci.state == http.StateNew || ci.state == http.StateActive && ci.stream.Load() {
			_ = c.Close()
		}
	}
}

// streamNoter notes on its connection that the response is an event
// stream, when its header is written. It forwards Flush and Unwrap, so
// that streams and http.ResponseController work through it.
type streamNoter struct {
	http.ResponseWriter
	ci      *connInfo
	written bool
}

func (w *streamNoter) note() {
	if !w.written {
		w.written = true
		if strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
			w.ci.stream.Store(true)
		}
	}
}

func (w *streamNoter) WriteHeader(code int) {
	w.note()
	w.ResponseWriter.WriteHeader(code)
}

func (w *streamNoter) Write(b []byte) (int, error) {
	w.note()
	return w.ResponseWriter.Write(b)
}

func (w *streamNoter) Flush() {
	w.note()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *streamNoter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
