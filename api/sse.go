package api

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
)

// stream serves a subscription as Server-Sent Events. Frames, in order:
// the ":ok" comment, connected, the snapshot when due, then events, with a
// ping every heartbeat. It ends after a run's or message's terminal event
// (with an end frame), at the max lifetime or at shutdown (after a
// reconnect frame), or when the client falls too far behind; the client
// resumes from its last id.
//
// The response head and ":ok" go out at once, before the subscription
// starts: starting it may wait on the store (a thread this node has not
// loaded, a cursor checked there), and a client must be able to tell a
// slow server from a dead one. What the subscription then finds ends the
// stream in-band (see fail).
//
// On HTTP/1.1 the connection is taken over from net/http: the stream is
// written by one small goroutine, each batch of frames with one writev of
// the frames' shared bytes, and net/http's per-request state is freed. An
// idle stream then costs a goroutine and a few buffers, not two goroutines
// and a response writer's. Other protocols (HTTP/2) keep net/http's path.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, req engine.SubscribeRequest) {
	done, ok := s.live(w, r)
	if !ok {
		return
	}
	st := &sseStream{s: s, reqID: requestID(r), done: done, p: principalOf(r)}
	s.metrics.streams.Inc()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no")
	if r.ProtoMajor == 1 {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			// The response is ours to write from here: its head, then the
			// stream, which ends when the connection closes. Dead peers
			// show up as write errors, at the latest at the next ping.
			st.out = &connOut{conn: conn, timeout: s.opts.WriteTimeout}
			st.f.add(responseHead(h))
			st.f.add(okComment)
			ctx, cancel := context.WithCancel(context.Background())
			st.unwatch, st.unwatchCtx = watchLeave(conn, cancel), cancel
			// The first frames (the snapshot may be large) are built here,
			// so that the goroutine that lives as long as the stream keeps
			// a small stack.
			if !st.send() || !st.open(ctx, req, rightsOf(r)) {
				st.finish()
				return
			}
			go st.serve(ctx)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
	st.out = &httpOut{w: w, rc: http.NewResponseController(w), timeout: s.opts.WriteTimeout}
	defer st.finish()
	st.f.add(okComment)
	if !st.send() || !st.open(r.Context(), req, rightsOf(r)) {
		return
	}
	st.run(r.Context())
}

// open checks the token's rights if guard left them to the stream (rights
// not nil), starts the stream's subscription and queues its first frames.
// If the subscription cannot start, it sends the frame that ends the
// stream (see fail) and returns false.
func (st *sseStream) open(ctx context.Context, req engine.SubscribeRequest, rights func(context.Context) error) bool {
	sub, err := st.s.subscribeChecked(ctx, req, rights)
	if err != nil {
		st.fail(ctx, err)
		return false
	}
	st.sub = sub
	st.start()
	return true
}

// fail ends a stream whose subscription could not start, after ":ok" (so
// without the status a JSON request gets), with the same error body:
// a store that did not answer (unavailable) or a fault (internal) with
// reconnect, which clients resume from as after a 503; anything else (an
// unknown thread, run or message) with end, reason error, after which
// clients stop, as after a 404.
func (st *sseStream) fail(ctx context.Context, err error) {
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return // the client left
	}
	te := streamError(err)
	if statusOf(te.Code) >= 500 {
		st.s.log.Error("stream failed to start", "err", err, "request_id", st.reqID)
	}
	info := errorInfo(te)
	switch te.Code {
	case tether.CodeUnavailable:
		st.f.event("reconnect", "", jsonOf(failed{Reason: "unavailable", Error: info}))
	case tether.CodeInternal:
		st.f.event("reconnect", "", jsonOf(failed{Reason: "error", Error: info}))
	default:
		st.f.event("end", "", jsonOf(failed{Reason: "error", Error: info}))
	}
	st.send()
}

// readFailed queues the frame that ends a stream whose read of the log
// failed after it started: reconnect, with the error body, as for a
// stream that could not start (unavailable: the store did not answer;
// error: anything else, logged), so that the client resumes at once from
// its last id. Whatever the error, the stream's cursor is good: never end.
func (st *sseStream) readFailed(err error) {
	te := streamError(err)
	reason := "error"
	if te.Code == tether.CodeUnavailable {
		reason = "unavailable"
	}
	st.f.event("reconnect", "", jsonOf(failed{Reason: reason, Error: errorInfo(te)}))
}

// streamError is what a stream tells its client of err: a Tether error
// as it is, a timeout as unavailable, anything else (a store's own
// error, whose text stays in the server's log) as internal.
func streamError(err error) *tether.Error {
	var te *tether.Error
	switch {
	case errors.As(err, &te):
		return te
	case errors.Is(err, context.DeadlineExceeded):
		return tether.Wrap(err, tether.CodeUnavailable, "the request timed out; retry")
	default:
		return tether.Wrap(err, tether.CodeInternal, "internal error")
	}
}

// errorInfo is te as a frame's error: its message, or its code if it has
// none.
func errorInfo(te *tether.Error) tether.ErrorInfo {
	msg := te.Message
	if msg == "" {
		msg = string(te.Code)
	}
	return tether.ErrorInfo{Code: string(te.Code), Message: msg}
}

// failed is the data of the frame that ends a stream that could not start.
type failed struct {
	Reason string           `json:"reason"`
	Error  tether.ErrorInfo `json:"error"`
}

// errSubscribeTimeout ends a stream that waited SubscribeTimeout for the
// store.
var errSubscribeTimeout = tether.Errorf(tether.CodeUnavailable, "the store did not answer in time; retry")

// subscribe starts a stream's subscription, waiting at most
// SubscribeTimeout: a store that does not answer (a NATS server down)
// would otherwise leave the client with ":ok" and nothing after. The
// engine honours ctx except in a thread's load, which its first caller
// runs to the end for the others waiting on it: that is why the
// subscription starts on a goroutine of its own, closed if it comes too
// late.
func (s *Server) subscribe(ctx context.Context, req engine.SubscribeRequest) (*engine.Subscription, error) {
	return s.subscribeChecked(ctx, req, nil)
}

// subscribeChecked is subscribe that first makes check, if not nil, under
// the same bound: a check that reads the store (a token's rights) waits
// on it as the subscription does.
func (s *Server) subscribeChecked(ctx context.Context, req engine.SubscribeRequest, check func(context.Context) error) (*engine.Subscription, error) {
	// The bound is a context of its own, not a child of ctx, which lives
	// as long as the stream: a child would leave ctx with a map of its
	// children, empty but kept, for every idle stream. ctx's end is
	// watched below instead.
	parent := ctx
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.SubscribeTimeout)
	ch := make(chan subscribed, 1)
	go func() {
		if check != nil {
			if err := check(ctx); err != nil {
				ch <- subscribed{nil, err}
				return
			}
		}
		sub, err := s.e.Subscribe(ctx, req)
		ch <- subscribed{sub, err}
	}()
	select {
	case st := <-ch:
		timedOut := ctx.Err() == context.DeadlineExceeded
		cancel()
		if st.err != nil && timedOut {
			return nil, errSubscribeTimeout
		}
		return st.sub, st.err
	case <-ctx.Done():
		cancel()
		go closeLate(ch)
		return nil, errSubscribeTimeout
	case <-parent.Done():
		cancel()
		go closeLate(ch)
		return nil, parent.Err() // the client left
	}
}

// subscribed is the outcome of a subscription's start.
type subscribed struct {
	sub *engine.Subscription
	err error
}

// closeLate closes a subscription that started after its stream gave up
// on it.
func closeLate(ch <-chan subscribed) {
	if st := <-ch; st.sub != nil {
		st.sub.Close()
	}
}

// responseHead is the status line and headers of a taken-over stream.
func responseHead(h http.Header) []byte {
	h.Set("Connection", "close")
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 200 OK\r\n")
	_ = h.Write(&b)
	b.WriteString("\r\n")
	return b.Bytes()
}

// sseStream is one stream being written.
type sseStream struct {
	s     *Server
	sub   *engine.Subscription
	out   sseOut
	reqID string
	f     frames
	done  func()    // ends the stream's registration with the server
	p     Principal // who opened it: the stream ends at its token's exp, or once a reload removed its key
	// unwatch, if set, stops watching a taken-over connection for its
	// client leaving (see watchLeave); unwatchCtx cancels the context the
	// watch cancels.
	unwatch    func()
	unwatchCtx context.CancelFunc
}

// serve writes a taken-over stream, on a goroutine of its own. It is a
// method, not a closure, so that the goroutine keeps nothing of the
// context run drops once the stream is live.
func (st *sseStream) serve(ctx context.Context) {
	defer st.finish()
	st.run(ctx)
}

func (st *sseStream) finish() {
	st.stopWatching()
	if st.unwatchCtx != nil {
		st.unwatchCtx()
	}
	if st.sub != nil {
		st.sub.Close()
	}
	st.out.close()
	st.s.metrics.streams.Dec()
	st.done()
}

// start queues the first frames after ":ok": connected, the snapshot when
// due, and the end when there is nothing to follow.
func (st *sseStream) start() {
	s, sub := st.s, st.sub
	st.f.event("connected", "", jsonOf(connected{
		ThreadID: sub.ThreadID, RunID: sub.RunID, MessageID: sub.MessageID, Offset: sub.Tail,
		HeartbeatMs: s.opts.Heartbeat.Milliseconds(), ServerTime: tether.Now(),
	}))
	if sub.Snapshot != nil {
		st.f.event("snapshot", string(sub.Snapshot.Offset), jsonOf(sub.Snapshot))
	}
	if sub.Done() {
		st.f.event("end", "", endOf(sub))
	}
}

// stopWatching ends the watch for the client leaving, if one runs, and
// reports whether one did.
func (st *sseStream) stopWatching() bool {
	if st.unwatch == nil {
		return false
	}
	st.unwatch()
	st.unwatch = nil
	return true
}

// watchLeave cancels a taken-over stream's context when its client closes
// the connection, which net/http no longer watches once it has handed the
// connection over. It matters while the stream reads history: each page
// waits for one of the store's few connections, and streams of clients
// long gone must not keep them queued (thousands did, under mass resumes,
// delaying every other read by minutes). Once the stream is live it
// writes from memory, and a client that left shows up as a write error
// at the next frame or ping, so the watch, a goroutine blocked in a read,
// is stopped there: an idle stream keeps costing one goroutine. The
// returned function stops the watch and returns once it has.
func watchLeave(conn net.Conn, cancel context.CancelFunc) (stop func()) {
	done := make(chan struct{})
	var stopping atomic.Bool
	go func() {
		defer close(done)
		var b [64]byte
		for {
			// A client sends nothing on a stream; whatever it sends is
			// dropped.
			if _, err := conn.Read(b[:]); err != nil {
				if !stopping.Load() {
					cancel()
				}
				return
			}
		}
	}()
	return func() {
		stopping.Store(true)
		_ = conn.SetReadDeadline(time.Unix(1, 0))
		<-done
		_ = conn.SetReadDeadline(time.Time{})
	}
}

// send writes the pending frames.
func (st *sseStream) send() bool {
	if len(st.f.bufs) == 0 {
		return true
	}
	all := st.f.bufs
	b := all // send may consume its copy of the slice
	err := st.out.send(&b)
	st.f.reset(all)
	return err == nil
}

var okComment = []byte(":ok\n\n")

// endOf is the data of the end frame of a run or message subscription.
func endOf(sub *engine.Subscription) string {
	if sub.MessageID != "" {
		return `{"reason":"message_finished"}`
	}
	return `{"reason":"run_finished"}`
}

type connected struct {
	ThreadID    string        `json:"thread_id"`
	RunID       string        `json:"run_id,omitempty"`
	MessageID   string        `json:"message_id,omitempty"`
	Offset      tether.Offset `json:"offset"`
	HeartbeatMs int64         `json:"heartbeat_ms"`
	ServerTime  tether.Time   `json:"server_time"`
}

// frames collects what to write next: event frames are the records' own
// SSE bytes, shared by every subscriber, never copied; control frames are
// small and built here.
type frames struct {
	bufs   net.Buffers
	pooled *net.Buffers // the pool's holder of bufs, when bufs is a burst's list
}

// keepFrames is the most frames a stream keeps room for between sends: an
// idle stream should hold little. Lists for bursts (a subscriber catching
// up, large appends) come from burstFrames and go back after the send, so
// that they are not grown from scratch for every burst either.
const keepFrames = 256

var burstFrames = sync.Pool{New: func() any { return new(net.Buffers) }}

func (f *frames) add(b []byte) { f.bufs = append(f.bufs, b) }

// reserve makes room for n more frames.
func (f *frames) reserve(n int) {
	need := len(f.bufs) + n
	if need <= cap(f.bufs) || need <= keepFrames {
		return
	}
	p := burstFrames.Get().(*net.Buffers)
	big := *p
	if cap(big) < need {
		big = make(net.Buffers, 0, max(need, 2*cap(big), 2*keepFrames))
	}
	f.bufs, f.pooled = append(big[:0], f.bufs...), p
}

// reset empties the list after a send (all is the list as it was before
// the send consumed it), without pinning what was sent.
func (f *frames) reset(all net.Buffers) {
	clear(all)
	if cap(all) > keepFrames {
		p := f.pooled
		if p == nil {
			p = new(net.Buffers)
		}
		*p = all[:0]
		burstFrames.Put(p)
		all, f.pooled = nil, nil
	}
	f.bufs = all[:0]
}

func (f *frames) event(name, id, data string) {
	b := make([]byte, 0, len(name)+len(id)+len(data)+24)
	if id != "" {
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, '\n')
	}
	b = append(b, "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	f.add(append(b, "\n\n"...))
}

// sseOut is where a stream's frames go.
type sseOut interface {
	// send writes the frames and flushes them, within the write timeout.
	// It may consume bufs.
	send(bufs *net.Buffers) error
	close()
}

// connOut writes to a taken-over connection: one writev per send.
type connOut struct {
	conn    net.Conn
	timeout time.Duration
}

func (o *connOut) send(bufs *net.Buffers) error {
	_ = o.conn.SetWriteDeadline(time.Now().Add(o.timeout))
	_, err := bufs.WriteTo(o.conn)
	return err
}

func (o *connOut) close() { _ = o.conn.Close() }

// httpOut writes through net/http (HTTP/2, or a writer that cannot be
// taken over).
type httpOut struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (o *httpOut) send(bufs *net.Buffers) error {
	_ = o.rc.SetWriteDeadline(time.Now().Add(o.timeout))
	for _, b := range *bufs {
		if _, err := o.w.Write(b); err != nil {
			return err
		}
	}
	return o.rc.Flush()
}

func (o *httpOut) close() {}
