package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	tether "github.com/tetherhq/tether"
)

type ctxKey int

const reqInfoKey ctxKey = 0

// reqInfo is what the middleware keeps of a request, in its context:
// one value, so that a request is copied once for it (WithContext).
type reqInfo struct {
	id string // the request's ID (withRequestID)
	// streamed is set when the request answers with a stream or a long
	// poll (holdStream): how long it lasts is the client's or the
	// wait's, so it is kept out of the latency histogram.
	streamed atomic.Bool
	// shed is set when the request was refused to shed load (see shed):
	// its 5xx is logged at info, not as a failure.
	shed atomic.Bool
}

func infoOf(r *http.Request) *reqInfo {
	ri, _ := r.Context().Value(reqInfoKey).(*reqInfo)
	return ri
}

func requestID(r *http.Request) string {
	if ri := infoOf(r); ri != nil {
		return ri.id
	}
	return ""
}

// markStreamed records that the request answers with a stream or a long
// poll.
func markStreamed(r *http.Request) {
	if ri := infoOf(r); ri != nil {
		ri.streamed.Store(true)
	}
}

// statusWriter records the status and size of a response. It forwards
// Flush and Unwrap so that streams and http.ResponseController work.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// withRequestID gives every request its ID, the client's X-Request-Id if
// it sent one of at most 128 characters, else a new one, and answers with
// it. It is the outermost layer, so that every response carries it, also
// those answered before a route is found (a Host refused, a preflight)
// and /metrics.
func withRequestID(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 128 {
			var b [8]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", id)
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), reqInfoKey, &reqInfo{id: id})))
	})
}

// observe logs each request, counts it and turns a panic into a 500 that
// leaks nothing.
func (s *Server) observe(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ri := infoOf(r) // withRequestID is the outermost layer (Handler)
		id := ri.id
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic", "route", route, "request_id", id, "panic", v, "stack", string(debug.Stack()))
				if sw.status == 0 {
					s.writeError(sw, r, tether.Errorf(tether.CodeInternal, "internal error"))
				}
			}
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			s.metrics.request(route, r.Method, status, time.Since(start), ri.streamed.Load())
			level := slog.LevelInfo
			switch {
			case status >= 500 && !ri.shed.Load():
				level = slog.LevelError
			case route == "/healthz" || route == "/readyz" || route == "/metrics" || route == "/":
				level = slog.LevelDebug
			}
			s.log.LogAttrs(r.Context(), level, "request",
				slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", status),
				slog.Duration("duration", time.Since(start)), slog.Int64("bytes", sw.bytes), slog.String("request_id", id))
		}()
		h.ServeHTTP(sw, r)
	})
}

// cors answers preflights and sets CORS headers for allowed origins.
func (s *Server) cors(h http.Handler) http.Handler {
	if len(s.opts.CORSOrigins) == 0 {
		return h
	}
	anyOrigin := slices.Contains(s.opts.CORSOrigins, "*")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin != "" && (anyOrigin || slices.Contains(s.opts.CORSOrigins, origin)) {
			hd := w.Header()
			hd.Set("Access-Control-Allow-Origin", origin)
			hd.Add("Vary", "Origin")
			hd.Set("Access-Control-Expose-Headers", strings.Join(exposedHeaders, ", "))
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				hd.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, HEAD, OPTIONS")
				hd.Set("Access-Control-Allow-Headers", strings.Join(allowedHeaders, ", "))
				hd.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

var exposedHeaders = []string{"Location", "Content-Location", "X-Request-Id", "Retry-After",
	"Producer-Epoch", "Producer-Seq", "Producer-Expected-Seq", "Producer-Received-Seq",
	// The offset the AI SDK's chat messages are as of.
	"Tether-Offset",
	// Durable Streams (/v1/stream/).
	"Stream-Next-Offset", "Stream-Cursor", "Stream-Up-To-Date", "Stream-Closed", "Stream-TTL",
	"Stream-Expires-At", "Stream-SSE-Data-Encoding", "ETag"}

var allowedHeaders = []string{"Authorization", "Content-Type", "Last-Event-ID", "Idempotency-Key", "Cache-Control",
	"Tether-Lease", "Producer-Id", "Producer-Epoch", "Producer-Seq", "X-Request-Id",
	// Durable Streams (/v1/stream/).
	"If-None-Match", "Stream-Seq", "Stream-TTL", "Stream-Expires-At", "Stream-Closed",
	"Stream-Forked-From", "Stream-Fork-Offset", "Stream-Fork-Sub-Offset"}
