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
	// Keys are the API tokens. With none, auth is off (the caller decides
	// whether that is safe: tether serve allows it only on loopback).
	Keys []Key
	// CORSOrigins are the origins browsers may call from; "*" allows any.
	// Defaults to none (same origin only).
	CORSOrigins []string
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
	// SubscribeTimeout bounds how long a new SSE stream waits for the
	// store before its response starts (a thread this node has not loaded
	// is read from the store first, a resume checks its cursor there):
	// past it the answer is 503 unavailable, and the client retries.
	// Defaults to 5s.
	SubscribeTimeout time.Duration
	// MaxBodyBytes limits request bodies (a worker's batch of events).
	// Defaults to 4 MiB.
	MaxBodyBytes int64
	// MaxWait caps long-poll waits (?wait= and claim wait_ms). Defaults to 30s.
	MaxWait time.Duration
	// MaxSubscriptions limits the subscriptions open at once on one
	// WebSocket. Defaults to 256.
	MaxSubscriptions int
	// Streams, if set, serves the Durable Streams protocol at /v1/stream/
	// (package api/durablestreams).
	Streams *streams.Service
	// Wake, if set, serves the Durable Streams subscription APIs under
	// /v1/stream/__ds/.
	Wake *wake.Manager
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
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Server is Tether's HTTP interface over an engine.
type Server struct {
	e       *engine.Engine
	opts    Options
	log     *slog.Logger
	auth    *auth
	metrics *metrics

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
	s := &Server{e: e, opts: opts, log: opts.Logger, auth: newAuth(opts.Keys), shutdown: make(chan struct{})}
	s.stopping, s.stopAll = context.WithCancel(context.Background())
	s.beat = newBeat(opts.Heartbeat, opts.MaxStreamLifetime, s.stopping.Done())
	s.metrics = newMetrics(e)
	s.ready.Store(true)
	return s
}

// Handler returns the HTTP handler of every route.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern string, h http.HandlerFunc) {
		mux.Handle(pattern, s.observe(pattern, h))
	}
	const (
		admin  = RoleAdmin
		client = RoleClient
		worker = RoleWorker
	)
	handle("GET /healthz", s.healthz)
	handle("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", s.metrics.handler())

	handle("POST /v1/threads", s.allow(s.createThread, client))
	handle("GET /v1/threads", s.allow(s.listThreads, client))
	handle("GET /v1/threads/{tid}", s.allow(s.getThread, client))
	handle("DELETE /v1/threads/{tid}", s.allow(s.deleteThread, client))
	handle("GET /v1/threads/{tid}/final-answer", s.allow(s.finalAnswer, client))
	handle("POST /v1/threads/{tid}/runs", s.allow(s.createRun, client))
	handle("POST /v1/threads/{tid}/runs/stream", s.allow(s.createRunStream, client))
	handle("GET /v1/threads/{tid}/events", s.allow(s.threadEvents, client))

	handle("GET /v1/runs/{rid}", s.allow(s.getRun, client, worker))
	handle("GET /v1/runs/{rid}/events", s.allow(s.runEvents, client, worker))
	handle("POST /v1/runs/{rid}/cancel", s.allow(s.cancelRun, client))
	handle("POST /v1/runs/{rid}/input", s.allow(s.submitInput, client))

	handle("GET /v1/ws", s.wsToken(s.allow(s.websocket, client, worker)))

	handle("POST /v1/workers/claim", s.allow(s.claim, worker))
	handle("POST /v1/runs/{rid}/events", s.allow(s.appendEvents, worker))
	handle("POST /v1/runs/{rid}/heartbeat", s.allow(s.heartbeat, worker))

	if s.opts.Streams != nil {
		ds := durablestreams.New(s.opts.Streams, durablestreams.Options{
			LongPollTimeout: s.opts.LongPollTimeout, MaxBodyBytes: s.opts.MaxBodyBytes, WriteTimeout: s.opts.WriteTimeout,
			Wake: s.opts.Wake, Stopping: s.stopping, Logger: s.log,
			Live: s.live,
		})
		handle(durablestreams.Prefix, s.allow(ds.ServeHTTP, client, worker))
		// These authenticate themselves (the JWKS is public; callbacks,
		// acks and releases carry the wake's own bearer token), so that
		// a webhook receiver needs no API key.
		handle("GET "+durablestreams.Prefix+"__ds/jwks.json", ds.ServeHTTP)
		for _, action := range []string{"callback", "ack", "release"} {
			handle("POST "+durablestreams.Prefix+"__ds/subscriptions/{id}/"+action, ds.ServeHTTP)
		}
	}

	handle("/", s.fallback())
	_ = admin
	return s.cors(mux)
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
// long poll) that Shutdown waits for, and returns the function that ends
// it. Once shutdown has started it refuses (ok is false), and the caller
// answers 503 so that the client reconnects elsewhere.
func (s *Server) live() (done func(), ok bool) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if s.stopped() {
		return nil, false
	}
	s.streams.Add(1)
	return s.streams.Done, true
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
