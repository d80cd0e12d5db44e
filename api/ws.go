package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/nest"
)

// The WebSocket endpoint, GET /v1/ws: many subscriptions on one socket, as
// JSON text frames (docs/protocol.md §5, "WebSocket").
//
// Each socket has a reader (the handler's goroutine), one writer draining a
// bounded outbound queue (wsout.go), a pinger, and one goroutine per
// subscription that moves the engine subscription's records to the queue
// (wssub.go). Every frame of a subscription (subscribed, snapshot, events,
// end) is queued by its own goroutine, so they stay in order. The handler
// returns only after every goroutine of the socket has ended.

const (
	// wsReadLimit is the largest frame a client may send; a larger one
	// closes the socket with 1009 (StatusMessageTooBig). Client frames are
	// small commands; the limit keeps one socket from pinning memory.
	wsReadLimit = 64 << 10
	// wsMaxIDLen bounds subscription ids, which are echoed in every frame.
	wsMaxIDLen = 128
)

// queryToken lets browsers authenticate on the WebSocket route with
// ?access_token=<token>: the browser WebSocket API cannot set an
// Authorization header, and Tether uses no cookies. The token is moved into
// the Authorization header (which wins if both are set) and removed from
// the URL before anything else sees the request, so it is never logged or
// echoed. Other routes do not accept it: a token in a URL can end up in
// proxy logs and browser history, so it is taken only where there is no
// other way. Use TLS, and a client-role token, in browsers.
//
// Given more than once it is a bad request (as a repeated subscription
// parameter is, singleParams): which one the server would take is not for
// the client to guess. Every copy is removed from the URL all the same.
func queryToken(r *http.Request) (*http.Request, error) {
	q := r.URL.Query()
	if !q.Has("access_token") {
		return r, nil
	}
	toks := q["access_token"]
	q.Del("access_token")
	r = r.Clone(r.Context())
	r.URL.RawQuery = q.Encode()
	r.RequestURI = r.URL.RequestURI()
	if len(toks) > 1 {
		return r, tether.Errorf(tether.CodeBadRequest, "access_token is given more than once")
	}
	if r.Header.Get("Authorization") == "" && toks[0] != "" {
		r.Header.Set("Authorization", "Bearer "+toks[0])
	}
	return r, nil
}

// websocket serves GET /v1/ws. Auth (by guard) and the origin check
// happen before the upgrade, so a refused client gets a plain HTTP error.
func (s *Server) websocket(w http.ResponseWriter, r *http.Request) {
	// A worker token may follow only the runs it holds or held, as on SSE;
	// a user's token only its threads (each subscribe is checked).
	p := principalOf(r)
	done, ok := s.live(w, r)
	if !ok {
		return
	}
	c, err := websocket.Accept(w, r, s.acceptOptions())
	if err != nil {
		done()
		return // Accept answered (403 for a foreign origin, 426 without an upgrade)
	}
	c.SetReadLimit(wsReadLimit)
	s.metrics.sockets.Inc()

	// The socket outlives this handler: its context keeps the request's
	// values, not its end.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	wc := &wsConn{
		s: s, c: c, ctx: ctx, cancel: cancel, p: p, reqID: requestID(r),
		out:  newWSQueue(int(wsQueueBytes.Load())),
		subs: make(map[string]*wsSub),
	}
	wc.expired = s.expiry(ctx, p)
	wc.bg.Add(1)
	go wc.writeLoop()
	go wc.readLoop(done)
}

// readLoop reads the client's frames until the socket ends, then ends its
// subscriptions and its writer. It runs on a goroutine of its own, which
// starts with a small stack and keeps nothing of the upgrade request or of
// net/http's goroutine, whose stack grew deep serving it: the socket's
// reader is one of the few goroutines an idle socket costs. For the same
// reason each frame is handled on a goroutine of its own (see handle).
func (wc *wsConn) readLoop(done func()) {
	defer done()
	defer wc.s.metrics.sockets.Dec()
	defer func() {
		wc.cancel()
		wc.subWG.Wait()
		wc.bg.Wait()
		_ = wc.c.CloseNow()
	}()
	for {
		typ, data, err := wc.c.Read(wc.ctx)
		if err != nil {
			return // closed by the client, too large (1009), cut, or shut down
		}
		// Answers are queued unconditionally, so hold further commands
		// while the queue is full: a client that sends but does not read
		// is slowed down, not buffered.
		if !wc.out.waitRoom(wc.ctx, nil) {
			return
		}
		// Decoding the frame, checking rights and subscribing (store
		// reads) need a deep stack: that runs aside, and the reader's
		// stays small. Frames are still handled one after another.
		if !wc.s.aside(func() { wc.handle(typ, data) }) {
			return
		}
	}
}

// acceptOptions allows the page's own origin and Options.CORSOrigins.
// Checking the origin matters most when auth is off (on loopback): it keeps
// other sites' pages from reading a local server through a visitor's
// browser.
func (s *Server) acceptOptions() *websocket.AcceptOptions {
	o := &websocket.AcceptOptions{}
	for _, origin := range s.opts.CORSOrigins {
		if origin == "*" {
			o.InsecureSkipVerify = true
			continue
		}
		o.OriginPatterns = append(o.OriginPatterns, originPattern.Replace(origin))
	}
	return o
}

// originPattern escapes what the WebSocket library's origin patterns
// (path.Match) would read as a pattern: an origin is matched as it is
// written, and an IPv6 host's brackets are not a character class.
var originPattern = strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)

// wsConn is one socket.
type wsConn struct {
	s      *Server
	c      *websocket.Conn
	ctx    context.Context // ends with the socket
	cancel context.CancelFunc
	p      Principal // who opened the socket: a worker may follow only its runs, a user its threads
	// expired is closed when the token expires (nil: it never does).
	expired <-chan struct{}
	reqID   string
	out     *wsQueue
	bg      sync.WaitGroup // the writer, and a control ping awaiting its pong
	pinging atomic.Bool    // a control ping awaits its pong
	subWG   sync.WaitGroup // subscription goroutines

	mu      sync.Mutex
	subs    map[string]*wsSub
	closing bool // shutting down: no new subscriptions
}

// wsRequest is a client frame. Fields beyond op and id depend on op.
type wsRequest struct {
	Op        string   `json:"op"`
	ID        string   `json:"id"`
	ThreadID  string   `json:"thread_id"`
	RunID     string   `json:"run_id"`
	MessageID string   `json:"message_id"`
	After     string   `json:"after"`
	Types     []string `json:"types"`
}

// handle answers one client frame. Every error is an error frame; the
// socket stays open.
func (wc *wsConn) handle(typ websocket.MessageType, data []byte) {
	if typ != websocket.MessageText {
		wc.sendError("", tether.Errorf(tether.CodeBadRequest, "binary frames are not supported; send JSON text frames"))
		return
	}
	if !json.Valid(data) {
		wc.sendError("", tether.Errorf(tether.CodeBadRequest, "the frame is not valid JSON"))
		return
	}
	// JSON is UTF-8 (RFC 8259), as a request body must be (readBody);
	// decoding does not check it, and would turn every id that is not
	// into U+FFFD, echoed as another id than the client's.
	if err := nest.Check(data); err != nil {
		wc.sendError("", tether.Errorf(tether.CodeBadRequest, "the frame %v", err))
		return
	}
	if b := bytes.TrimLeft(data, " \t\r\n"); len(b) == 0 || b[0] != '{' {
		wc.sendError("", tether.Errorf(tether.CodeBadRequest, "a frame must be a JSON object"))
		return
	}
	var head struct {
		Op json.RawMessage `json:"op"`
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(data, &head) // a valid object: cannot fail
	var op, id string
	if len(head.ID) > 0 && string(head.ID) != "null" {
		if json.Unmarshal(head.ID, &id) != nil || id == "" || len(id) > wsMaxIDLen {
			wc.sendError("", tether.Errorf(tether.CodeBadRequest, "id must be a non-empty string of at most %d bytes", wsMaxIDLen))
			return
		}
	}
	if len(head.Op) > 0 && json.Unmarshal(head.Op, &op) != nil {
		wc.sendError(id, tether.Errorf(tether.CodeBadRequest, "op must be a string"))
		return
	}
	switch op {
	case "ping":
		wc.out.push(wsFrame{head: pongFrame(id)})
		return
	case "pong":
		return // a client may answer our pings; nothing to do
	case "subscribe", "unsubscribe":
	case "":
		wc.sendError(id, tether.Errorf(tether.CodeBadRequest, "op is missing"))
		return
	default:
		wc.sendError(id, tether.Errorf(tether.CodeBadRequest, "unknown op %q (want subscribe, unsubscribe or ping)", op))
		return
	}
	if id == "" {
		wc.sendError("", tether.Errorf(tether.CodeBadRequest, "id is missing"))
		return
	}
	var req wsRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		wc.sendError(id, tether.Errorf(tether.CodeBadRequest, "%s", tether.JSONError(err)))
		return
	}
	if op == "unsubscribe" {
		wc.unsubscribe(id)
		return
	}
	wc.subscribe(id, req)
}

// subscribe starts a subscription, or answers why not.
func (wc *wsConn) subscribe(id string, req wsRequest) {
	wc.mu.Lock()
	_, dup := wc.subs[id]
	n := len(wc.subs)
	wc.mu.Unlock()
	limit := wc.s.opts.MaxSubscriptions
	switch {
	case dup:
		wc.sendError(id, tether.Errorf(tether.CodeConflict, "subscription %s already exists", id))
		return
	case n >= limit:
		wc.sendError(id, tether.Errorf(tether.CodeTooLarge, "a socket may hold at most %d subscriptions", limit))
		return
	case req.ThreadID == "" && req.RunID == "":
		wc.sendError(id, tether.Errorf(tether.CodeBadRequest, "thread_id or run_id is required"))
		return
	case wc.p.Role == RoleWorker && req.RunID == "":
		wc.sendError(id, tether.Errorf(tether.CodeForbidden, "a worker token may only subscribe to runs"))
		return
	}
	if err := wc.mayFollow(req); err != nil {
		wc.sendError(id, err)
		return
	}
	cursor, err := tether.ParseCursor(req.After)
	if err != nil {
		wc.sendError(id, err)
		return
	}
	if err := checkTypes(req.Types); err != nil {
		wc.sendError(id, err)
		return
	}
	// Bounded by SubscribeTimeout, as an SSE stream's start: the socket's
	// frames are handled one after another, and a store that does not
	// answer must not leave the client without one.
	es, err := wc.s.subscribe(wc.ctx, engine.SubscribeRequest{
		ThreadID: req.ThreadID, RunID: req.RunID, MessageID: req.MessageID, Types: req.Types, Cursor: cursor,
	})
	if err != nil {
		wc.sendError(id, err)
		return
	}
	sub := newWSSub(wc.ctx, id, es, wc.s.opts.Heartbeat)
	wc.mu.Lock()
	if wc.closing {
		wc.mu.Unlock()
		es.Close()
		wc.sendError(id, errShuttingDown)
		return
	}
	// Only this goroutine adds subscriptions, so the checks above hold.
	wc.subs[id] = sub
	wc.subWG.Add(1)
	wc.mu.Unlock()
	go wc.follow(sub)
}

// mayFollow checks the socket's rights to what req follows, on each
// subscribe as on each request. A worker's run, or a user's thread, is
// looked up in the store when the node has not loaded it: the look is
// bounded by SubscribeTimeout, as the subscribe is, so that a store that
// does not answer leaves no frame of the socket without an answer.
func (wc *wsConn) mayFollow(req wsRequest) error {
	ctx, cancel := context.WithTimeout(wc.ctx, wc.s.opts.SubscribeTimeout)
	defer cancel()
	err := func() error {
		if req.RunID != "" {
			if err := wc.s.mayReadRun(ctx, wc.p, req.RunID); err != nil {
				return err
			}
			if err := wc.s.allowRun(ctx, wc.p, actRead, req.RunID); err != nil {
				return err
			}
		}
		if req.ThreadID != "" {
			return wc.s.allow(ctx, wc.p, actRead, req.ThreadID)
		}
		return nil
	}()
	if err != nil && ctx.Err() == context.DeadlineExceeded {
		return errSubscribeTimeout
	}
	return err
}

// unsubscribe ends a subscription with reason unsubscribed. It waits for
// the subscription's goroutine, so that its end frame comes before
// anything about a later subscription with the same id.
func (wc *wsConn) unsubscribe(id string) {
	wc.mu.Lock()
	sub := wc.subs[id]
	delete(wc.subs, id)
	if sub != nil {
		sub.stop(wsUnsubscribed) // under wc.mu: see end
	}
	wc.mu.Unlock()
	if sub == nil {
		wc.sendError(id, tether.Errorf(tether.CodeNotFound, "subscription %s not found", id))
		return
	}
	<-sub.done
}

// stopAll ends every subscription with reason and waits for their
// goroutines; later subscribes are refused.
func (wc *wsConn) stopAll(reason string) {
	wc.mu.Lock()
	wc.closing = true
	for id, sub := range wc.subs {
		delete(wc.subs, id)
		sub.stop(reason) // under wc.mu: see end
	}
	wc.mu.Unlock()
	wc.subWG.Wait()
}

// forget removes a subscription that ended by itself.
func (wc *wsConn) forget(sub *wsSub) {
	wc.mu.Lock()
	if wc.subs[sub.id] == sub {
		delete(wc.subs, sub.id)
	}
	wc.mu.Unlock()
}

// sendError queues an error frame. Errors that are not *tether.Error are
// internal: logged in full, sent with a generic message.
func (wc *wsConn) sendError(id string, err error) {
	var te *tether.Error
	if !errors.As(err, &te) {
		if wc.ctx.Err() != nil {
			return // the socket is gone
		}
		wc.s.log.Error("websocket", "request_id", wc.reqID, "id", id, "err", err)
		te = tether.Wrap(err, tether.CodeInternal, "internal error")
	}
	msg := te.Message
	if msg == "" {
		msg = string(te.Code)
	}
	wc.out.push(wsFrame{head: []byte(jsonOf(struct {
		Op    string           `json:"op"`
		ID    string           `json:"id,omitempty"`
		Error tether.ErrorInfo `json:"error"`
	}{"error", id, tether.ErrorInfo{Code: string(te.Code), Message: msg}}))})
}
