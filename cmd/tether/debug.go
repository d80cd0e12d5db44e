package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// listenDebug opens the debug server's listener. pprof shows the
// process's insides (goroutine stacks, heap, CPU profiles), so it listens
// on loopback unless the operator insists (public), and then, like the
// API, only with keys or --insecure (guarded). A refusal names the
// address as given (0.0.0.0:6060), not as the kernel reports it ([::]).
func listenDebug(addr string, public, guarded bool) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("debug server: listen: %w", err)
	}
	switch {
	case isLoopback(ln.Addr()):
	case !public:
		ln.Close()
		return nil, fmt.Errorf("refusing to serve the debug server on %s, not a loopback address: pass --debug-public to insist", addr)
	case !guarded:
		ln.Close()
		return nil, fmt.Errorf("refusing to serve the debug server on %s without API keys: set --token or --keys, or pass --insecure", addr)
	}
	return ln, nil
}

// debugHandler serves pprof, but not /debug/pprof/cmdline: the command
// line holds --token.
func debugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/debug/pprof/cmdline" {
			http.NotFound(w, r)
			return
		}
		pprof.Index(w, r)
	})
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// debugServer bounds what a client may hold: headers within 10 s, and
// profiles (?seconds=) of up to about 2 minutes.
func debugServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      2*time.Minute + 10*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
