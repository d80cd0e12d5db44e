package api

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/bearer"
)

// Role is what a token may do.
type Role string

// Roles.
const (
	// RoleAdmin may do everything.
	RoleAdmin Role = "admin"
	// RoleWorker may claim runs, append to and heartbeat the runs it holds
	// (under the key that claimed them), and read and follow the runs it
	// holds or held; nothing else.
	RoleWorker Role = "worker"
	// RoleClient may manage threads and runs, answer input, cancel,
	// subscribe, and use Durable Streams (/v1/stream/).
	RoleClient Role = "client"
)

// Key is one API token and its role.
type Key struct {
	Token string
	Role  Role
	// Name identifies the key in logs (never the token itself).
	Name string

	id string // keyID(Token), set by newAuth
}

// ParseKeys reads a keys file: one key per line, "role token [name]";
// blank lines and lines starting with # are ignored, as is a UTF-8 byte
// order mark at its start (some editors write one, and the first role
// would read "\ufeffadmin").
func ParseKeys(r io.Reader) ([]Key, error) {
	var keys []Key
	lines := make(map[string]int) // token → its line
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if n == 1 {
			text = strings.TrimPrefix(text, "\ufeff")
		}
		line := strings.TrimSpace(text)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || len(f) > 3 {
			return nil, fmt.Errorf("keys line %d: want \"role token [name]\"", n)
		}
		k := Key{Role: Role(f[0]), Token: f[1], Name: fmt.Sprintf("line%d", n)}
		if len(f) == 3 {
			k.Name = f[2]
		}
		switch k.Role {
		case RoleAdmin, RoleWorker, RoleClient:
		default:
			return nil, fmt.Errorf("keys line %d: role must be admin, worker or client", n)
		}
		if len(k.Token) < 16 {
			return nil, fmt.Errorf("keys line %d: a token must be at least 16 characters", n)
		}
		if first, ok := lines[k.Token]; ok {
			// One token, one key: otherwise the last line would win in
			// silence, with whatever role it gives.
			return nil, fmt.Errorf("keys line %d: the same token as line %d", n, first)
		}
		lines[k.Token] = n
		keys = append(keys, k)
	}
	return keys, sc.Err()
}

// auth holds keys by the hash of their token, so that a lookup does not
// compare secrets byte by byte, and the verifier of signed tokens.
type auth struct {
	keys map[[32]byte]Key
	// roles are the keys' roles by their id (Key.id): a stream opened with
	// a key ends once a reload removed the key or changed its role (held).
	roles map[string]Role
	jwt   *verifier // nil: no signed tokens
	// jwtErr is why the token options were refused: every JWT is then
	// refused (tether serve refuses such settings at start, loadTokens).
	jwtErr error
}

func newAuth(keys []Key, tokens TokenOptions) *auth {
	if len(keys) == 0 && !tokens.Enabled() {
		return nil
	}
	a := &auth{keys: make(map[[32]byte]Key, len(keys)), roles: make(map[string]Role, len(keys))}
	for _, k := range keys {
		k.id = keyID(k.Token)
		a.keys[sha256.Sum256([]byte(k.Token))] = k
		a.roles[k.id] = k.Role
	}
	a.jwt, a.jwtErr = newVerifier(tokens)
	return a
}

// keyID names a key in leases (store.Lease.KeyID) without holding its
// token: a digest, domain-separated from the lookup hash, so that what a
// store keeps cannot be replayed as a token nor matched against the
// lookup table. Every node with the same keys names a key the same way,
// so a lease claimed through one node is appended to through another.
func keyID(token string) string {
	sum := sha256.Sum256([]byte("tether lease key\x00" + token))
	return "k_" + base64.RawURLEncoding.EncodeToString(sum[:16])
}

// check returns the principal of a request, or an unauthorized error
// (token_expired for a JWT past its exp). A request with more than one
// Authorization header is refused (bad_request) rather than judged by one
// of them: proxies and servers disagree on which wins. A token shaped as
// a JWT is verified as one; anything else is looked up in the keys.
func (a *auth) check(r *http.Request) (Principal, error) {
	if err := oneAuthorization(r); err != nil {
		return Principal{}, err
	}
	tok, ok := bearer.Token(r.Header.Get("Authorization"))
	if !ok {
		return Principal{}, tether.Errorf(tether.CodeUnauthorized, "missing bearer token (Authorization: Bearer <token>)")
	}
	if k, ok := a.keys[sha256.Sum256([]byte(tok))]; ok {
		return keyPrincipal(k), nil
	}
	if a.jwt != nil && isJWT(tok) {
		return a.jwt.verify(tok)
	}
	return Principal{}, tether.Errorf(tether.CodeUnauthorized, "invalid token")
}

func oneAuthorization(r *http.Request) error {
	if len(r.Header.Values("Authorization")) > 1 {
		return tether.Errorf(tether.CodeBadRequest, "send one Authorization header, not several")
	}
	return nil
}

// access is who may call a route: one value per route of the table in
// server.go (routes), which is the one place the rules of
// docs/protocol.md §9 are written. guard enforces them for every route.
type access uint8

const (
	// accessOpen: anyone, no token (health, readiness, metrics, the page,
	// the webhook signing keys).
	accessOpen access = iota
	// accessWake: the route checks its own bearer token (a Durable
	// Streams wake's), so that a webhook receiver needs no API key.
	accessWake
	// accessClient: client and admin tokens.
	accessClient
	// accessWorker: worker and admin tokens. A lease is bound to the key
	// that claimed it (engine.Holder).
	accessWorker
	// accessRun: client and admin tokens, and a worker token for the runs
	// it holds or held last: {rid} of the path, or, on the WebSocket, the
	// run of each subscription (a worker may subscribe to nothing else).
	accessRun
	// accessAdmin: admin tokens only (the server's configuration, such as
	// declared agents).
	accessAdmin
)

// allows reports whether a role may call a route of this access, before
// any check of the run the request names (accessRun).
func (a access) allows(role Role) bool {
	switch a {
	case accessOpen, accessWake:
		return true
	case accessClient:
		return role == RoleAdmin || role == RoleClient
	case accessWorker:
		return role == RoleAdmin || role == RoleWorker
	case accessRun:
		return role == RoleAdmin || role == RoleClient || role == RoleWorker
	case accessAdmin:
		return role == RoleAdmin
	}
	return false
}

// keyOf returns the key a request was let in with, as leases know it:
// its role and the id leases are bound to; the zero Key (no role, no id)
// when auth is off or the route is open.
func keyOf(r *http.Request) Key {
	p, ok := PrincipalFrom(r.Context())
	if !ok {
		return Key{}
	}
	return Key{Role: p.Role, Name: p.Name, id: p.LeaseID}
}

// guard enforces a route's access, and refuses a state-changing request
// that a browser sends from another origin (crossOrigin), whatever the
// route and whether or not keys are set. It is the only place requests
// are let in: the role (access), then, for a signed client token, the
// thread the route names (the route's act, see allow).
func (s *Server) guard(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt.queryToken {
			var err error
			if r, err = queryToken(r); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		if err := s.crossOrigin(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		a := s.auth.Load()
		if a == nil || rt.access == accessOpen || rt.access == accessWake {
			rt.h.ServeHTTP(w, r)
			return
		}
		p, err := a.check(r)
		if err != nil {
			if c := tether.CodeOf(err); c == tether.CodeUnauthorized || c == tether.CodeTokenExpired {
				w.Header().Set("WWW-Authenticate", `Bearer realm="tether"`)
			}
			s.writeError(w, r, err)
			return
		}
		if !rt.access.allows(p.Role) {
			s.writeError(w, r, tether.Errorf(tether.CodeForbidden, "a %s token may not do this", p.Role))
			return
		}
		rights := func(ctx context.Context) error {
			if rid := r.PathValue("rid"); rt.access == accessRun && rid != "" {
				if err := s.mayReadRun(ctx, p, rid); err != nil {
					return err
				}
			}
			return s.allowRoute(ctx, r, p, rt)
		}
		if rt.stream && !wantsJSON(r) {
			// The rights read the store (a thread's owner, a run's lease),
			// and an SSE stream answers before any read of the store: the
			// stream checks them after ":ok" (sse.go).
			rt.h.ServeHTTP(w, withRights(withPrincipal(r, p), rights))
			return
		}
		if err := rights(r.Context()); err != nil {
			s.writeError(w, r, err)
			return
		}
		rt.h.ServeHTTP(w, withPrincipal(r, p))
	})
}

// mayReadRun checks that p may read a run: any principal but a worker's; a
// worker's only if the run's lease (current, or last once finished) was
// claimed with it.
func (s *Server) mayReadRun(ctx context.Context, p Principal, runID string) error {
	if s.auth.Load() == nil || p.Role != RoleWorker {
		return nil
	}
	held, err := s.e.HeldBy(ctx, runID, p.LeaseID)
	if err != nil {
		return err
	}
	if !held {
		return tether.Errorf(tether.CodeForbidden, "a worker token may read only the runs it holds or held")
	}
	return nil
}

// Admin wraps h, a handler served beside the API (tether serve's debug
// server), with the API's checks: the Host check (Options.LoopbackHosts)
// and, when keys are set, an admin token.
func (s *Server) Admin(h http.Handler) http.Handler {
	return s.front(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := s.auth.Load(); a != nil {
			p, err := a.check(r)
			if err == nil && p.Role != RoleAdmin {
				err = tether.Errorf(tether.CodeForbidden, "only an admin token may do this")
			}
			if err != nil {
				if c := tether.CodeOf(err); c == tether.CodeUnauthorized || c == tether.CodeTokenExpired {
					w.Header().Set("WWW-Authenticate", `Bearer realm="tether"`)
				}
				s.writeError(w, r, err)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
}
