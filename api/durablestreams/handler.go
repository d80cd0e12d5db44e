package durablestreams

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/tetherhq/tether/streams"
	"github.com/tetherhq/tether/streams/wake"
)

// Prefix is where the handler is mounted.
const Prefix = "/v1/stream/"

// Options configure a Handler. The zero value is ready to use.
type Options struct {
	// LongPollTimeout is how long a long poll waits for data before it
	// answers 204, and the interval of keep-alive control events on SSE.
	// Defaults to 30s.
	LongPollTimeout time.Duration
	// SSELifetime ends an SSE response after this long (the client
	// reconnects from its offset), so that caches can collapse readers.
	// Defaults to 60s.
	SSELifetime time.Duration
	// MaxBodyBytes limits the body of a create or an append. Defaults to
	// 4 MiB.
	MaxBodyBytes int64
	// WriteTimeout bounds each write of a live response; a client that
	// does not read for this long is cut. Defaults to 30s.
	WriteTimeout time.Duration
	// CursorInterval is the interval of Stream-Cursor values. Defaults to
	// 20s.
	CursorInterval time.Duration
	// BaseURL is the server's URL as clients reach it (e.g.
	// https://tether.example.com): the Location of a new stream is built
	// from it, never from the request's Host header (which the requester
	// chooses). Defaults to none: Location is then the path alone.
	BaseURL string
	// Wake, if set, serves the reserved subscription APIs under __ds/;
	// without it they answer 404.
	Wake *wake.Manager
	// Stopping, if set, ends long polls and SSE responses when it is done
	// (the server is shutting down).
	Stopping context.Context
	// Live, if set, is called when a long poll or SSE response starts; the
	// function it returns is called when it ends (so a server can wait for
	// them at shutdown, and count a principal's streams). When it refuses
	// (ok false: the server is shutting down, or the principal holds too
	// many streams) it has answered the request itself. Defaults to a
	// function that never refuses.
	Live func(w http.ResponseWriter, r *http.Request) (done func(), ok bool)
	// OpenSSE, if set, is called when an SSE response starts (after
	// Live let it in), and the function it returns when it ends: the
	// server counts open SSE streams, whatever protocol they speak.
	// Long polls are not counted.
	OpenSSE func() (closed func())
	// Expires, if set, returns when the credentials of a request expire
	// (the zero time: never). A long poll never waits past it; an SSE
	// response ends there with a reconnect event whose reason is
	// token_expired, and the client reconnects with fresh credentials.
	Expires func(r *http.Request) time.Time
	// EndDue, if set, reports why a live response to r must end now, or
	// "": the server's rule for every stream it serves (package api gives
	// its own: its shutdown, the token's exp). A response that always has
	// data ready (catching up from far behind, a stream appended to
	// without pause, a client that reads slowly) never waits on Stopping
	// or a timer, so SSE responses ask after every write: at
	// "token_expired" the response ends with a reconnect event of that
	// reason, at any other it just ends. Defaults to "shutdown" once
	// Stopping is done and "token_expired" from Expires on.
	EndDue func(r *http.Request) string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
}

func (o *Options) setDefaults() {
	if o.LongPollTimeout <= 0 {
		o.LongPollTimeout = 30 * time.Second
	}
	if o.SSELifetime <= 0 {
		o.SSELifetime = 60 * time.Second
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 4 << 20
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 30 * time.Second
	}
	if o.CursorInterval <= 0 {
		o.CursorInterval = 20 * time.Second
	}
	if o.Stopping == nil {
		o.Stopping = context.Background()
	}
	if o.Live == nil {
		o.Live = func(http.ResponseWriter, *http.Request) (func(), bool) { return func() {}, true }
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Expires == nil {
		o.Expires = func(*http.Request) time.Time { return time.Time{} }
	}
	if o.EndDue == nil {
		o.EndDue = func(r *http.Request) string {
			if o.Stopping.Err() != nil {
				return "shutdown"
			}
			if exp := o.Expires(r); !exp.IsZero() && !o.Now().Before(exp) {
				return reasonTokenExpired
			}
			return ""
		}
	}
}

// reasonTokenExpired is the reason of the reconnect event that ends an SSE
// response at its token's exp (and what Options.EndDue returns then).
const reasonTokenExpired = "token_expired"

// untilExpiry returns d, or less if the request's credentials expire
// sooner (expiring is then set).
func (h *Handler) untilExpiry(r *http.Request, d time.Duration) (_ time.Duration, expiring bool) {
	exp := h.opts.Expires(r)
	if exp.IsZero() {
		return d, false
	}
	if left := exp.Sub(h.opts.Now()); left < d {
		return max(left, 0), true
	}
	return d, false
}

// Handler serves the Durable Streams protocol under Prefix.
type Handler struct {
	svc  *streams.Service
	opts Options
	log  *slog.Logger
}

// New returns a handler over svc.
func New(svc *streams.Service, opts Options) *Handler {
	opts.setDefaults()
	return &Handler{svc: svc, opts: opts, log: opts.Logger}
}

// ServeHTTP serves one request under Prefix.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	// Browser security headers, on every answer (see security.go).
	setBrowserHeaders(hd)
	path, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		writeError(w, r, errorf(http.StatusNotFound, "not_found", "not found"))
		return
	}
	if r.Method == http.MethodOptions {
		preflight(w)
		return
	}
	if path == streams.ReservedPrefix || strings.HasPrefix(path, streams.ReservedPrefix+"/") {
		if h.opts.Wake == nil {
			writeError(w, r, errorf(http.StatusNotFound, "not_found", "not found"))
			return
		}
		h.subscriptions(w, r)
		return
	}
	switch r.Method {
	case http.MethodPut:
		h.create(w, r, path)
	case http.MethodPost:
		h.append(w, r, path)
	case http.MethodGet:
		h.read(w, r, path)
	case http.MethodHead:
		h.head(w, r, path)
	case http.MethodDelete:
		h.delete(w, r, path)
	default:
		hd.Set("Allow", "GET, HEAD, PUT, POST, DELETE, OPTIONS")
		writeError(w, r, errorf(http.StatusMethodNotAllowed, "method_not_allowed", "method %s is not allowed here", r.Method))
	}
}

// Headers a browser may send and read (CORS).
var (
	// RequestHeaders are the request headers of the protocol.
	RequestHeaders = []string{"Content-Type", "Authorization", "If-None-Match", "Stream-Seq", "Stream-TTL",
		"Stream-Expires-At", "Stream-Closed", "Stream-Forked-From", "Stream-Fork-Offset", "Stream-Fork-Sub-Offset",
		"Producer-Id", "Producer-Epoch", "Producer-Seq", "X-Request-Id"}
	// ResponseHeaders are the response headers of the protocol.
	ResponseHeaders = []string{"Stream-Next-Offset", "Stream-Cursor", "Stream-Up-To-Date", "Stream-Closed",
		"Stream-TTL", "Stream-Expires-At", "Stream-SSE-Data-Encoding", "ETag", "Location",
		"Producer-Epoch", "Producer-Seq", "Producer-Expected-Seq", "Producer-Received-Seq"}
)

// preflight answers a CORS preflight. Whether the origin may read the
// answer is the server's CORS decision (Access-Control-Allow-Origin, set
// by its middleware for allowed origins); this only says what the
// protocol's requests may carry.
func preflight(w http.ResponseWriter) {
	hd := w.Header()
	hd.Set("Access-Control-Allow-Methods", "GET, HEAD, PUT, POST, DELETE, OPTIONS")
	hd.Set("Access-Control-Allow-Headers", strings.Join(RequestHeaders, ", "))
	hd.Set("Access-Control-Expose-Headers", strings.Join(ResponseHeaders, ", "))
	hd.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}
