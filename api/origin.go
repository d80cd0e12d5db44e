package api

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
)

// Browsers let any page send "simple" requests to any server (a form post,
// fetch without CORS) and, once a page's name is rebound to 127.0.0.1,
// read the answers too (DNS rebinding). A server without keys on loopback
// (the default) is reachable so from every page its user visits. Three
// checks keep pages of other sites out, with or without keys
// (docs/operations.md, "Security"):
//
//   - crossOrigin: a state-changing request (any method but GET, HEAD,
//     OPTIONS) a browser sends from another origin is refused, unless that
//     origin is one of Options.CORSOrigins (Sec-Fetch-Site, or Origin
//     against Host; http.CrossOriginProtection).
//   - readBody: a browser's JSON body must be declared application/json,
//     which a page of another origin cannot send without a CORS preflight.
//     text/plain and form-encoded bodies are read as JSON only from
//     clients that are not browsers (curl -d).
//   - front: with Options.LoopbackHosts, the Host header must name a
//     loopback address (or one of Options.AllowedHosts), which a rebound
//     name never does.

// newCrossOrigin returns the check of crossOrigin, with the origins of
// Options.CORSOrigins trusted; nil if "*" trusts every origin.
func newCrossOrigin(origins []string, log *slog.Logger) *http.CrossOriginProtection {
	if slices.Contains(origins, "*") {
		return nil
	}
	cop := http.NewCrossOriginProtection()
	for _, o := range origins {
		if err := cop.AddTrustedOrigin(o); err != nil {
			// tether serve checks the origins first (CheckOrigins);
			// an embedder that did not gets the origin ignored.
			log.Warn("cors origin ignored", "origin", o, "err", err)
		}
	}
	return cop
}

// CheckOrigins checks origins as Options.CORSOrigins takes them: "*", or
// each scheme://host[:port] with nothing after.
func CheckOrigins(origins []string) error {
	if slices.Contains(origins, "*") {
		return nil
	}
	cop := http.NewCrossOriginProtection()
	for _, o := range origins {
		if err := cop.AddTrustedOrigin(o); err != nil {
			return fmt.Errorf("origin %q: want scheme://host[:port] or *", o)
		}
	}
	return nil
}

// crossOrigin refuses (forbidden) a state-changing request a browser sends
// from a page of an origin that is neither the server's nor trusted.
// Requests without browser headers (curl, the CLI, workers) pass.
func (s *Server) crossOrigin(r *http.Request) error {
	if s.cop == nil {
		return nil
	}
	if err := s.cop.Check(r); err != nil {
		return tether.Errorf(tether.CodeForbidden,
			"cross-origin request refused: a page of another origin may not change anything here (trusted origins are set with --cors-origins)")
	}
	return nil
}

// fromBrowser reports whether a request comes from a browser: browsers
// send Origin with every POST, PUT and DELETE, and Sec-Fetch-Site with
// every request to a secure or loopback origin; curl, the CLI, the Go
// client and workers send neither.
func fromBrowser(r *http.Request) bool {
	return r.Header.Get("Origin") != "" || r.Header.Get("Sec-Fetch-Site") != ""
}

// front runs before routing, for every request: the Host check
// (Options.LoopbackHosts) and the refusal of several Authorization
// headers.
func (s *Server) front(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.opts.LoopbackHosts && !s.hostAllowed(r.Host) {
			s.log.Info("request refused: Host not allowed", "host", r.Host, "method", r.Method, "path", r.URL.Path, "request_id", requestID(r))
			s.writeError(w, r, tether.Errorf(tether.CodeBadRequest,
				"Host %q is not allowed: this server answers only to loopback names (localhost, 127.0.0.1, [::1]); add names with --allowed-hosts", clip.String(r.Host, 100)))
			return
		}
		if err := oneAuthorization(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether host, a Host header, names a loopback
// address (localhost, *.localhost, 127.0.0.0/8, ::1; any port) or one of
// Options.AllowedHosts ("*": any).
func (s *Server) hostAllowed(host string) bool {
	name := hostName(host)
	if name == "" {
		return false
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	if ip, err := netip.ParseAddr(name); err == nil && ip.Unmap().IsLoopback() {
		return true
	}
	for _, a := range s.opts.AllowedHosts {
		if a == "*" || hostName(a) == name {
			return true
		}
	}
	return false
}

// hostName is the name of a Host value: lower case, without port,
// brackets or a trailing dot.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.TrimSuffix(strings.ToLower(host), ".")
}
