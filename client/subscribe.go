package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	tether "github.com/tetherhq/tether"
)

// SubscribeRequest says what [Client.Subscribe] follows and from where.
type SubscribeRequest struct {
	// ThreadID follows a whole thread; the subscription stays open across
	// runs until the context is done. It is not used when RunID is set.
	ThreadID string
	// RunID follows one run; the subscription ends after its run.finished.
	RunID string
	// MessageID narrows the subscription to one message; it ends after the
	// message's message.finished (or its run's run.finished).
	MessageID string
	// Types, if set, keeps only events of these types.
	Types []string
	// After is where to start: "" for a snapshot first and then every
	// later event; tether.OffsetStart ("-1") for the whole log from its
	// first event; tether.OffsetNow for new events only; or the offset of
	// an event, for every event after it.
	After tether.Offset
	// OnState, if set, is called (on the iterating goroutine) each time
	// the connection state changes, for UIs to show.
	OnState func(State)
}

// Update is one item of a subscription: exactly one of Snapshot and Event
// is set.
type Update struct {
	// Snapshot is the state to show before the events that follow it. It
	// replaces what the consumer had when Snapshot.Reset is set (the
	// cursor could not be placed in the log).
	Snapshot *tether.Snapshot
	// Event is the next event of the log.
	Event *tether.Event
}

// State is the connection state of a subscription.
type State int

// Connection states, in the order a subscription goes through them.
const (
	StateConnecting   State = iota // making the first connection
	StateOpen                      // connected; events flow
	StateReconnecting              // the connection dropped; waiting to resume
	StateClosed                    // the iteration is over
)

// String returns the state's name: connecting, open, reconnecting or
// closed.
func (s State) String() string {
	switch s {
	case StateConnecting:
		return "connecting"
	case StateOpen:
		return "open"
	case StateReconnecting:
		return "reconnecting"
	case StateClosed:
		return "closed"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// defaultHeartbeat is assumed until the server's connected frame says
// otherwise: the protocol's default ping interval.
const defaultHeartbeat = 15 * time.Second

// stallFactor: a stream with nothing for stallFactor heartbeats is dead.
const stallFactor = 3

// errStalled cancels a connection that went silent.
var errStalled = errors.New("no data for 3 heartbeats")

// Subscribe follows the events of a thread, a run or a message (GET
// /v1/threads/{tid}/events or /v1/runs/{rid}/events, as Server-Sent
// Events) and yields them in log order, each once.
//
// It resumes by itself after any drop (end of stream, network error, 5xx,
// 429, a stream silent for 3 heartbeats), from the last event it yielded
// (sent as Last-Event-ID), with exponential backoff and full jitter, and
// not before an answer's Retry-After (up to MaxBackoff); a server's
// "reconnect" frame resumes at once. Events at or before the last
// yielded offset are skipped. With Options.TokenFunc, a stream the server
// ends at its token's exp (reconnect, reason token_expired) resumes with
// a fresh token, as does a connection answered 401 token_expired (once);
// a token function that fails is retried with the backoff.
//
// The iteration ends:
//   - after run.finished, for a run subscription; after the message's
//     message.finished (or its run's run.finished) for a message
//     subscription; also when a snapshot or the server shows that the run
//     or message had already ended;
//   - when the consumer stops iterating; the connection is closed;
//   - when ctx is done: ctx.Err() is yielded;
//   - on an error that retrying cannot fix: it is yielded, then the
//     iteration ends. These are the answers other than 200, 5xx, 408 and
//     429 (so 400, 401, 403, 404, 410…; a 401 token_expired only for a
//     static token, or once a fresh token got it too), as a *tether.Error
//     with the server's code, and the same errors sent in-band by a
//     stream that could not start (an end frame with reason error: an
//     unknown thread, run or message); a 200 that is not an event stream;
//     a malformed event or snapshot; a frame over 64 MiB.
//
// Errors that are retried are not yielded: they are logged
// (Options.Logger) and shown through OnState. Every yielded error ends the
// iteration.
func (c *Client) Subscribe(ctx context.Context, req SubscribeRequest) iter.Seq2[Update, error] {
	return func(yield func(Update, error) bool) {
		s := &subscription{c: c, req: req, state: -1}
		s.run(ctx, yield)
	}
}

type subscription struct {
	c     *Client
	req   SubscribeRequest
	state State

	// cursor is the offset of the last event or snapshot yielded (or the
	// tail at connect time, for After "now"); empty until there is one.
	cursor tether.Offset
	msgRun string // the run of the followed message, once known
	done   bool   // the followed run or message ended: stop
}

// outcome is how one connection ended.
type outcome struct {
	err       error         // why it ended, if not by a clean end of stream
	fatal     bool          // err cannot be fixed by retrying: yield it and stop
	stop      bool          // the iteration is over (consumer gone or subscription done)
	now       bool          // reconnect without backoff (the server asked)
	wait      time.Duration // the answer's Retry-After: the least wait before the next try
	connected bool          // a connected frame came
	yielded   int           // events and snapshots yielded on this connection
}

func (s *subscription) setState(st State) {
	if st == s.state {
		return
	}
	s.state = st
	if s.req.OnState != nil {
		s.req.OnState(st)
	}
}

func (s *subscription) run(ctx context.Context, yield func(Update, error) bool) {
	defer s.setState(StateClosed)
	s.setState(StateConnecting)
	if s.req.ThreadID == "" && s.req.RunID == "" {
		yield(Update{}, tether.Errorf(tether.CodeBadRequest, "subscribe: a thread id or a run id is needed"))
		return
	}
	if s.req.MessageID != "" && s.req.RunID != "" {
		s.msgRun = s.req.RunID
	}
	attempt, asked := 0, 0
	for {
		o := s.connect(ctx, yield)
		if o.stop {
			return
		}
		if ctx.Err() != nil {
			yield(Update{}, ctx.Err())
			return
		}
		if o.fatal {
			yield(Update{}, o.err)
			return
		}
		if o.connected {
			attempt = 0
		}
		if o.err == nil && o.connected && o.yielded == 0 && s.ended(ctx) {
			// The server closed right after connected: it does that when
			// the run or message ended before the cursor.
			return
		}
		s.setState(StateReconnecting)
		// Reconnect at once when the server asks, but not twice in a row
		// without an event between: a server that asks again and again
		// gets the backoff.
		if o.now && (asked == 0 || o.yielded > 0) {
			asked++
			s.c.log(slog.LevelDebug, "tether: the server asked to reconnect", "path", s.path())
			continue
		}
		asked = 0
		d := max(s.c.backoff(attempt), min(o.wait, s.c.max))
		attempt++
		level := slog.LevelWarn
		if o.err == nil {
			level = slog.LevelDebug // a stream that ended: max lifetime, a proxy
		}
		s.c.log(level, "tether: stream dropped; resuming", "path", s.path(), "err", o.err, "delay", d)
		if err := sleep(ctx, d); err != nil {
			yield(Update{}, err)
			return
		}
	}
}

func (s *subscription) path() string {
	if s.req.RunID != "" {
		return "/v1/runs/" + escape(s.req.RunID) + "/events"
	}
	return "/v1/threads/" + escape(s.req.ThreadID) + "/events"
}

// request builds the GET of one connection: the cursor goes in
// Last-Event-ID once there is one, else After goes in ?after=. The token
// is added when it is sent (Client.send).
func (s *subscription) request(ctx context.Context) (*http.Request, error) {
	q := url.Values{}
	if s.req.MessageID != "" {
		q.Set("message_id", s.req.MessageID)
	}
	if len(s.req.Types) > 0 {
		q.Set("types", strings.Join(s.req.Types, ","))
	}
	var lastID string
	switch {
	case s.cursor.IsEvent():
		lastID = string(s.cursor)
	case s.cursor == tether.OffsetStart:
		// A snapshot of an empty log: every event is after it.
		q.Set("after", string(tether.OffsetStart))
	case s.req.After != "":
		q.Set("after", string(s.req.After))
	}
	u := s.c.base + s.path()
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	return req, nil
}

// connect runs one connection until it ends.
func (s *subscription) connect(ctx context.Context, yield func(Update, error) bool) (o outcome) {
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := s.request(cctx)
	if err != nil {
		return outcome{err: fmt.Errorf("subscribe: %w", err), fatal: true}
	}
	// The stall timer covers the wait for the answer too: a server that
	// takes the connection and never answers is as dead as a silent one.
	w := &watchdog{}
	w.timeout.Store(int64(stallFactor * defaultHeartbeat))
	w.t = time.AfterFunc(stallFactor*defaultHeartbeat, func() { cancel(errStalled) })
	defer w.t.Stop()

	dropped := func(err error) outcome {
		if context.Cause(cctx) == errStalled {
			err = errStalled
		}
		o.err = err
		return o
	}

	resp, tok, err := s.c.send(req)
	if err != nil {
		// Also a token function that failed: retried with the backoff.
		return dropped(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err := responseError(resp)
		st := resp.StatusCode
		retry := st >= 500 || st == http.StatusRequestTimeout || st == http.StatusTooManyRequests
		return outcome{err: err, fatal: !retry, wait: retryAfter(resp)}
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		if mt == "" {
			mt = "no content type"
		}
		return outcome{err: tether.Errorf(CodeProtocol, "server answered %.64s, not an event stream", mt), fatal: true}
	}
	w.r = resp.Body
	// Ask for the next token ahead of this one's exp, so that the
	// reconnect when the server ends the stream there does not wait on it.
	// A failure is left to the reconnect, which asks again.
	if at, ok := s.c.tokens.refreshTime(); ok {
		t := time.AfterFunc(at.Sub(s.c.tokens.now()), func() {
			if cctx.Err() == nil {
				_, _ = s.c.tokens.get(cctx)
			}
		})
		defer t.Stop()
	}
	p := newSSEReader(w)
	for {
		f, err := p.next()
		if err == io.EOF {
			return o
		}
		if err == errFrameTooLarge {
			return outcome{err: tether.Errorf(tether.CodeTooLarge, "subscribe: %s", err.Error()), fatal: true}
		}
		if err != nil {
			return dropped(err)
		}
		if !o.connected && f.Event != "connected" && f.Event != "ping" {
			// A server that skips connected still counts as open.
			s.setState(StateOpen)
		}
		switch f.Event {
		case "connected":
			var c struct {
				Offset      tether.Offset `json:"offset"`
				HeartbeatMs int           `json:"heartbeat_ms"`
			}
			_ = json.Unmarshal([]byte(f.Data), &c)
			if c.HeartbeatMs > 0 {
				w.setTimeout(stallFactor * time.Duration(c.HeartbeatMs) * time.Millisecond)
			}
			if s.req.After == tether.OffsetNow && s.cursor == "" && c.Offset != "" && c.Offset != tether.OffsetNow {
				// "now" again on a reconnect would skip what came meanwhile.
				s.cursor = c.Offset
			}
			o.connected = true
			s.setState(StateOpen)
		case "ping":
		case "reconnect":
			// A stream that could not start says why (the store did not
			// answer): resumed all the same, and logged. One that reached
			// its token's exp resumes with a fresh token.
			var e struct {
				Reason string            `json:"reason"`
				Error  *tether.ErrorInfo `json:"error"`
			}
			if json.Unmarshal([]byte(f.Data), &e) == nil && e.Error != nil && e.Error.Code != "" {
				o.err = &tether.Error{Code: tether.Code(e.Error.Code), Message: e.Error.Message}
			}
			if e.Reason == string(tether.CodeTokenExpired) {
				s.c.tokens.expired(tok)
			}
			o.now = true
			return o
		case "end":
			// The server says the subscription is complete: a run or
			// message ended (at or before the cursor), or the thread was
			// deleted; or that it could not start (an unknown thread, run
			// or message: the error a status would have said).
			var e struct {
				Reason string            `json:"reason"`
				Error  *tether.ErrorInfo `json:"error"`
			}
			_ = json.Unmarshal([]byte(f.Data), &e)
			if e.Reason == "thread_deleted" {
				return outcome{err: tether.Errorf(tether.CodeNotFound, "subscribe: the thread was deleted"), fatal: true}
			}
			if e.Error != nil && e.Error.Code != "" {
				return outcome{err: &tether.Error{Code: tether.Code(e.Error.Code), Message: e.Error.Message}, fatal: true}
			}
			s.done = true
			o.stop = true
			return o
		case "snapshot":
			if f.NoData {
				continue
			}
			var snap tether.Snapshot
			if err := json.Unmarshal([]byte(f.Data), &snap); err != nil {
				return outcome{err: tether.Errorf(CodeProtocol, "subscribe: the snapshot is not valid JSON"), fatal: true}
			}
			if snap.Offset == "" && f.HasID {
				snap.Offset = tether.Offset(f.ID)
			}
			// A reset snapshot replaces the consumer's state, so the cursor
			// follows it, also backwards; another never moves it back.
			if snap.Reset || !s.cursor.IsEvent() || snap.Offset.After(s.cursor) {
				s.cursor = snap.Offset
			}
			s.noteSnapshot(&snap)
			o.yielded++
			if !w.pause(func() bool { return yield(Update{Snapshot: &snap}, nil) }) || s.done {
				o.stop = true
				return o
			}
		default:
			if f.NoData || !f.HasID {
				continue // a control frame this client does not know
			}
			var ev tether.Event
			if err := json.Unmarshal([]byte(f.Data), &ev); err != nil {
				return outcome{err: tether.Errorf(CodeProtocol, "subscribe: event %.64q is not valid JSON", f.ID), fatal: true}
			}
			if ev.Offset == "" && f.HasID {
				ev.Offset = tether.Offset(f.ID)
			}
			if ev.Type == "" {
				ev.Type = f.Event
			}
			if ev.Offset != "" && s.cursor.IsEvent() && !ev.Offset.After(s.cursor) {
				s.c.log(slog.LevelWarn, "tether: skipped an event at or before the last one", "offset", ev.Offset, "cursor", s.cursor)
				continue
			}
			if ev.Offset != "" {
				s.cursor = ev.Offset
			}
			s.noteEvent(&ev)
			o.yielded++
			if !w.pause(func() bool { return yield(Update{Event: &ev}, nil) }) || s.done {
				o.stop = true
				return o
			}
		}
	}
}

// noteEvent sets done if ev ends the followed run or message.
func (s *subscription) noteEvent(ev *tether.Event) {
	switch {
	case s.req.MessageID != "":
		if ev.MessageID == s.req.MessageID && ev.RunID != "" {
			s.msgRun = ev.RunID
		}
		switch ev.Type {
		case tether.EventMessageFinished:
			s.done = ev.MessageID == s.req.MessageID
		case tether.EventMessageCreated:
			m := ev.Message
			s.done = m != nil && m.ID == s.req.MessageID && m.Status.Terminal()
		case tether.EventRunFinished:
			s.done = s.msgRun == "" || ev.RunID == "" || ev.RunID == s.msgRun
		}
	case s.req.RunID != "":
		s.done = ev.Type == tether.EventRunFinished && (ev.RunID == "" || ev.RunID == s.req.RunID)
	}
}

// noteSnapshot sets done if the snapshot shows the followed run or message
// already ended.
func (s *subscription) noteSnapshot(snap *tether.Snapshot) {
	switch {
	case s.req.MessageID != "":
		for _, m := range snap.Messages {
			if m.ID == s.req.MessageID {
				s.msgRun = m.RunID
				s.done = m.Status.Terminal()
			}
		}
		s.done = s.done || s.runEnded(snap.Runs, s.msgRun)
	case s.req.RunID != "":
		s.done = s.runEnded(snap.Runs, s.req.RunID)
	}
}

func (s *subscription) runEnded(runs []tether.Run, id string) bool {
	for _, r := range runs {
		if id != "" && r.ID == id {
			return r.Status.Terminal()
		}
	}
	return false
}

// ended asks the server whether the followed run or message has ended. A
// thread subscription never ends; a failed check means "not known to have
// ended".
func (s *subscription) ended(ctx context.Context) bool {
	var snap *tether.Snapshot
	var err error
	switch {
	case s.req.MessageID == "" && s.req.RunID == "":
		return false
	case s.req.MessageID == "" || s.msgRun != "":
		run := s.req.RunID
		if s.req.MessageID != "" {
			run = s.msgRun
		}
		snap, err = s.c.Run(ctx, run)
	default:
		snap, err = s.c.Thread(ctx, s.req.ThreadID)
	}
	if err != nil {
		s.c.log(slog.LevelWarn, "tether: could not check whether the subscription ended", "err", err)
		return false
	}
	s.noteSnapshot(snap)
	return s.done
}

// watchdog cancels a connection when no byte arrives for its timeout. It
// does not run while the consumer holds an update, which is not the
// server's silence.
type watchdog struct {
	r       io.Reader
	t       *time.Timer
	timeout atomic.Int64
}

func (w *watchdog) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if n > 0 {
		w.t.Reset(time.Duration(w.timeout.Load()))
	}
	return n, err
}

func (w *watchdog) setTimeout(d time.Duration) {
	w.timeout.Store(int64(d))
	w.t.Reset(d)
}

// pause stops the timer while f runs.
func (w *watchdog) pause(f func() bool) bool {
	w.t.Stop()
	defer w.t.Reset(time.Duration(w.timeout.Load()))
	return f()
}
