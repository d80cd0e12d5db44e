package api

import (
	"context"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetherhq/tether/api/durablestreams"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/streams"
	"github.com/tetherhq/tether/streams/wake"
)

// Options configure a Server. The zero value is ready to use.
type Options struct {
	// Keys are the API tokens. With none and no Tokens, auth is off (the
	// caller decides whether that is safe: tether serve allows it only on
	// loopback).
	Keys []Key
	// Tokens configure signed tokens (JWTs) for users: any key in them
	// turns auth on. Defaults to none.
	Tokens TokenOptions
	// CORSOrigins are the origins browsers may call from; "*" allows any.
	// Pages of these origins may also change state (POST, PUT, DELETE);
	// pages of other origins may not (see origin.go). Defaults to none
	// (same origin only).
	CORSOrigins []string
	// LoopbackHosts makes the server answer only requests whose Host
	// header names a loopback address (localhost, *.localhost,
	// 127.0.0.0/8, [::1], any port) or one of AllowedHosts; others get
	// 400. A page whose name was rebound to 127.0.0.1 (DNS rebinding)
	// sends its own name, so it cannot read a server without keys through
	// a visitor's browser. tether serve sets it when it listens on
	// loopback without keys. Defaults to off.
	LoopbackHosts bool
	// AllowedHosts are more Host names (port ignored) that LoopbackHosts
	// accepts, such as a reverse proxy's on the same machine; "*" accepts
	// any. Defaults to none.
	AllowedHosts []string
	// DefaultAgent is the agent of runs that name none. Defaults to "demo".
	DefaultAgent string
	// Heartbeat is the interval of ping events on streams. Defaults to 15s.
	Heartbeat time.Duration
	// MaxStreamLifetime ends streams after this long (the client resumes),
	// so that load balancers can rebalance. Defaults to 10m.
	MaxStreamLifetime time.Duration
	// WriteTimeout bounds each write to a stream; a client that does not
	// read for this long is cut. Defaults to 30s.
	WriteTimeout time.Duration
	// SubscribeTimeout bounds how long a new stream waits for the store
	// to start its subscription (a thread this node has not loaded is
	// read from the store first, a resume checks its cursor there): past
	// it a Tether SSE stream, already started with ":ok", ends with
	// reconnect (reason unavailable), an AG-UI or AI SDK stream, not
	// started yet, is answered 503, and a WebSocket subscribe is refused
	// unavailable; the client retries. Defaults to 5s.
	SubscribeTimeout time.Duration
	// MaxBodyBytes limits request bodies (a worker's batch of events).
	// Defaults to 4 MiB.
	MaxBodyBytes int64
	// MaxWait caps long-poll waits (?wait= and claim wait_ms). Defaults to 30s.
	MaxWait time.Duration
	// MaxSubscriptions limits the subscriptions open at once on one
	// WebSocket. Defaults to 256.
	MaxSubscriptions int
	// Limits are the rate limits of each principal and the cap on request
	// bodies in flight (limits.go). The zero value limits no principal.
	Limits Limits
	// Streams, if set, serves the Durable Streams protocol at /v1/stream/
	// (package api/durablestreams).
	Streams *streams.Service
	// Wake, if set, serves the Durable Streams subscription APIs under
	// /v1/stream/__ds/.
	Wake *wake.Manager
	// PublicURL is the server's URL as clients reach it; the Location of a
	// new Durable Stream is built from it (never from the Host header).
	// Defaults to none: Location is then a path.
	PublicURL string
	// LongPollTimeout is how long a Durable Streams long poll waits for
	// data. Defaults to 30s.
	LongPollTimeout time.Duration
	// Web, if set, is served at / (the chat page).
	Web fs.FS
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	if o.DefaultAgent == "" {
		o.DefaultAgent = "demo"
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.MaxStreamLifetime <= 0 {
		o.MaxStreamLifetime = 10 * time.Minute
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 30 * time.Second
	}
	if o.SubscribeTimeout <= 0 {
		o.SubscribeTimeout = 5 * time.Second
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 4 << 20
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 30 * time.Second
	}
	if o.LongPollTimeout <= 0 {
		o.LongPollTimeout = 30 * time.Second
	}
	if o.MaxSubscriptions <= 0 {
		o.MaxSubscriptions = 256
	}
	o.Limits.setDefaults(o.MaxBodyBytes)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Tokens.Now == nil {
		o.Tokens.Now = time.Now
	}
	if o.Tokens.Logger == nil {
		o.Tokens.Logger = o.Logger
	}
}

// Server is Tether's HTTP interface over an engine.
type Server struct {
	e       *engine.Engine
	opts    Options
	log     *slog.Logger
	auth    atomic.Pointer[auth]        // nil: auth is off; replaced by ReloadAuth
	cop     *http.CrossOriginProtection // nil: every origin is trusted
	metrics *metrics
	quotas  *quotas
	budget  *budget // nil: bodies in flight are not capped

	shutdown     chan struct{}
	stopping     context.Context // done once shutdown starts
	stopAll      context.CancelFunc
	shutdownOnce sync.Once
	liveMu       sync.Mutex // orders live() against Shutdown's Wait
	streams      sync.WaitGroup
	ready        atomic.Bool
	beat         *beat // the streams' clock
}

// New returns a server over e.
func New(e *engine.Engine, opts Options) *Server {
	opts.setDefaults()
	s := &Server{e: e, opts: opts, log: opts.Logger, shutdown: make(chan struct{})}
	if a := newAuth(opts.Keys, opts.Tokens); a != nil {
		s.auth.Store(a)
		if a.jwtErr != nil {
			s.log.Error("signed tokens are off: every one is refused", "err", a.jwtErr)
		}
	}
	s.cop = newCrossOrigin(opts.CORSOrigins, opts.Logger)
	s.stopping, s.stopAll = context.WithCancel(context.Background())
	s.beat = newBeat(opts.Heartbeat, opts.MaxStreamLifetime, s.stopping.Done())
	s.metrics = newMetrics(e)
	s.quotas = newQuotas(opts.Limits, nil)
	if opts.Limits.BodyBytes > 0 {
		s.budget = newBudget(opts.Limits.BodyBytes, opts.Limits.BodyBytesPerPrincipal)
	}
	s.metrics.reg.MustRegister(s.limitCollectors()...)
	s.ready.Store(true)
	return s
}

// route is one entry of the route table: a ServeMux pattern, who may call
// it, and its handler.
type route struct {
	pattern string
	access  access
	// act is what the route does to the thread it names, for the rights
	// of a signed client token (allow.go).
	act act
	h   http.Handler
	// queryToken takes the token from ?access_token= too (the browser
	// WebSocket API cannot set headers).
	queryToken bool
	// quiet routes are not logged or counted per request (/metrics).
	quiet bool
	// stream routes answer SSE (unless asked for JSON) with ":ok" before
	// any read of the store, the token's rights on the thread included
	// (guard leaves them to the stream: withRights).
	stream bool
}

// routes is every route of the API and who may call it: the one table of
// docs/protocol.md §9 ("Who may call what"), which TestRouteRoles checks
// against the document route by route and role by role. guard enforces
// it; no handler checks roles itself (the WebSocket checks each
// subscription's run with the same mayReadRun).
func (s *Server) routes() []route {
	h := func(f http.HandlerFunc) http.Handler { return f }
	rs := []route{
		{pattern: "GET /healthz", access: accessOpen, h: h(s.healthz)},
		{pattern: "GET /readyz", access: accessOpen, h: h(s.readyz)},
		{pattern: "GET /metrics", access: accessOpen, h: s.metrics.handler(), quiet: true},

		{pattern: "POST /v1/threads", access: accessClient, act: actCreate, h: h(s.createThread)},
		{pattern: "GET /v1/threads", access: accessClient, h: h(s.listThreads)},
		{pattern: "GET /v1/threads/{tid}", access: accessClient, act: actRead, h: h(s.getThread)},
		{pattern: "DELETE /v1/threads/{tid}", access: accessClient, act: actDelete, h: h(s.deleteThread)},
		{pattern: "GET /v1/threads/{tid}/final-answer", access: accessClient, act: actRead, h: h(s.finalAnswer)},
		{pattern: "POST /v1/threads/{tid}/runs", access: accessClient, act: actRun, h: h(s.createRun)},
		{pattern: "POST /v1/threads/{tid}/runs/stream", access: accessClient, act: actRun, h: h(s.createRunStream)},
		{pattern: "GET /v1/threads/{tid}/events", access: accessClient, act: actRead, h: h(s.threadEvents), stream: true},

		{pattern: "GET /v1/runs/{rid}", access: accessRun, act: actRead, h: h(s.getRun)},
		{pattern: "GET /v1/runs/{rid}/events", access: accessRun, act: actRead, h: h(s.runEvents), stream: true},
		{pattern: "POST /v1/runs/{rid}/cancel", access: accessClient, act: actCancel, h: h(s.cancelRun)},
		{pattern: "POST /v1/runs/{rid}/input", access: accessClient, act: actAnswer, h: h(s.submitInput)},

		// Each subscribe is checked (wsConn.subscribe).
		{pattern: "GET /v1/ws", access: accessRun, h: h(s.websocket), queryToken: true},

		// The body names the thread: aguiRun checks it.
		{pattern: "POST /v1/ag-ui/{agent}", access: accessClient, h: h(s.aguiRun)},
		{pattern: "GET /v1/ag-ui/threads/{tid}/events", access: accessClient, act: actRead, h: h(s.aguiThreadEvents)},
		{pattern: "GET /v1/ag-ui/threads/{tid}/runs/{rid}/events", access: accessClient, act: actRead, h: h(s.aguiRunEvents)},
		{pattern: "POST /v1/ag-ui/threads/{tid}/runs/{rid}/cancel", access: accessClient, act: actCancel, h: h(s.aguiCancel)},
		// The AI SDK's useChat (docs/ai-sdk.md): people's side, like the
		// thread routes they stand for. A chat is a thread.
		{pattern: "POST /v1/ai-sdk/{agent}/chat", access: accessClient, h: h(s.aisdkChat)},
		{pattern: "GET /v1/ai-sdk/{agent}/chat/{chat}/stream", access: accessClient, act: actRead, h: h(s.aisdkResume)},
		{pattern: "GET /v1/ai-sdk/{agent}/chat/{chat}/messages", access: accessClient, act: actRead, h: h(s.aisdkMessages)},
		{pattern: "POST /v1/ai-sdk/{agent}/chat/{chat}/stop", access: accessClient, act: actCancel, h: h(s.aisdkStop)},

		{pattern: "GET /v1/agents", access: accessClient, h: h(s.listAgents)},
		{pattern: "PUT /v1/agents/{name}", access: accessAdmin, h: h(s.declareAgent)},
		{pattern: "DELETE /v1/agents/{name}", access: accessAdmin, h: h(s.removeAgent)},

		{pattern: "POST /v1/workers/claim", access: accessWorker, h: h(s.claim)},
		{pattern: "POST /v1/runs/{rid}/events", access: accessWorker, h: h(s.appendEvents)},
		{pattern: "POST /v1/runs/{rid}/heartbeat", access: accessWorker, h: h(s.heartbeat)},
	}
	if s.opts.Streams != nil {
		ds := durablestreams.New(s.opts.Streams, durablestreams.Options{
			LongPollTimeout: s.opts.LongPollTimeout, MaxBodyBytes: s.opts.MaxBodyBytes, WriteTimeout: s.opts.WriteTimeout,
			Wake: s.opts.Wake, BaseURL: s.opts.PublicURL, Stopping: s.stopping, Logger: s.log,
			Live: s.live, Expires: func(r *http.Request) time.Time { return principalOf(r).Expires },
			// Counted with the server's other SSE streams
			// (tether_sse_streams).
			OpenSSE: func() func() { s.metrics.streams.Inc(); return s.metrics.streams.Dec },
			// Every stream's rule; the response's own lifetime is
			// SSELifetime.
			EndDue: func(r *http.Request) string { return s.endDue(time.Time{}, principalOf(r)) },
			Now:    s.opts.Tokens.Now,
		})
		// Every stream, thread log (threads/) and subscription (__ds/) is
		// the clients': thread logs hold the users' input, and a worker
		// token is for the runs it works on.
		rs = append(rs, route{pattern: durablestreams.Prefix, access: accessClient, act: actStream, h: ds})
		// These authenticate themselves (the JWKS is public; callbacks,
		// acks and releases carry the wake's own bearer token), so that a
		// webhook receiver needs no API key.
		rs = append(rs, route{pattern: "GET " + durablestreams.Prefix + "__ds/jwks.json", access: accessOpen, h: ds})
		for _, action := range []string{"callback", "ack", "release"} {
			rs = append(rs, route{pattern: "POST " + durablestreams.Prefix + "__ds/subscriptions/{id}/" + action, access: accessWake, h: ds})
		}
	}
	// The page, and a JSON not_found for anything else.
	return append(rs, route{pattern: "/", access: accessOpen, h: s.fallback()})
}

// Handler returns the HTTP handler of every route.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		rt.h = s.limit(rt.pattern, rt.h)
		h := s.guard(rt)
		if !rt.quiet {
			h = s.observe(rt.pattern, h)
		}
		mux.Handle(rt.pattern, h)
	}
	return withRequestID(s.front(s.cors(mux)))
}

// Shutdown marks the server not ready, tells every open stream to
// reconnect and ends it, and waits for the streams to finish their last
// write (bounded by the write timeout).
func (s *Server) Shutdown() {
	s.shutdownOnce.Do(func() {
		s.ready.Store(false)
		close(s.shutdown)
		s.stopAll()
	})
	// No live() may Add once Wait has begun: taking the lock after
	// stopping is done means every later live() sees it and refuses.
	s.liveMu.Lock()
	s.liveMu.Unlock()
	s.streams.Wait()
}

// live registers a long-lived response (an SSE stream, a WebSocket, a
// long poll) that Shutdown waits for, and counts it against its
// principal's streams (holdStream); it returns the function that ends it.
// It refuses (ok is false) once shutdown has started, answering 503 so
// that the client reconnects elsewhere, and over the principal's limit,
// answering 429.
func (s *Server) live(w http.ResponseWriter, r *http.Request) (done func(), ok bool) {
	release, ok := s.holdStream(w, r)
	if !ok {
		return nil, false
	}
	s.liveMu.Lock()
	stopped := s.stopped()
	if !stopped {
		s.streams.Add(1)
	}
	s.liveMu.Unlock()
	if stopped {
		release()
		s.writeError(w, r, errShuttingDown)
		return nil, false
	}
	return func() { s.streams.Done(); release() }, true
}

// untilShutdown returns a context for a long poll: it ends after d, when
// the request ends, or when the server starts shutting down, so that a
// long poll never holds a shutdown.
func (s *Server) untilShutdown(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, d)
	stop := context.AfterFunc(s.stopping, cancel)
	return ctx, func() { stop(); cancel() }
}

// stopped reports whether shutdown has started.
func (s *Server) stopped() bool { return s.stopping.Err() != nil }

// SetReady sets what /readyz answers (a server that is draining answers
// 503 so load balancers stop sending it new streams).
func (s *Server) SetReady(ok bool) { s.ready.Store(ok) }

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	select {
	case <-s.shutdown:
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "shutting_down"})
		return
	default:
	}
	if !s.ready.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not_ready"})
		return
	}
	if !s.e.Following() {
		// Cut off from the shared log: every stream here is refused
		// (engine/feed.go) while other nodes may serve.
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not_following_log"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// fallback serves the embedded chat page for GET and HEAD outside /v1/,
// and a JSON not_found for everything else (unknown routes and methods).
func (s *Server) fallback() http.HandlerFunc {
	var files http.Handler
	if s.opts.Web != nil {
		files = http.FileServerFS(s.opts.Web)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if files != nil && (r.Method == http.MethodGet || r.Method == http.MethodHead) && !strings.HasPrefix(r.URL.Path, "/v1/") {
			h := w.Header()
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("Referrer-Policy", "no-referrer")
			// The page loads only its own files and talks only to this
			// server; nothing may frame it.
			h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
			files.ServeHTTP(w, r)
			return
		}
		s.writeError(w, r, errNoRoute(r))
	}
}
