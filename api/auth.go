package api

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"strings"

	tether "github.com/tetherhq/tether"
)

// Role is what a token may do.
type Role string

// Roles.
const (
	// RoleAdmin may do everything.
	RoleAdmin Role = "admin"
	// RoleWorker may claim runs, append to them, heartbeat, and read and
	// follow the runs it works on.
	RoleWorker Role = "worker"
	// RoleClient may manage threads and runs, answer input, cancel and
	// subscribe.
	RoleClient Role = "client"
)

// Key is one API token and its role.
type Key struct {
	Token string
	Role  Role
	// Name identifies the key in logs (never the token itself).
	Name string
}

// ParseKeys reads a keys file: one key per line, "role token [name]";
// blank lines and lines starting with # are ignored.
func ParseKeys(r io.Reader) ([]Key, error) {
	var keys []Key
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
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
		keys = append(keys, k)
	}
	return keys, sc.Err()
}

// auth holds keys by the hash of their token, so that a lookup does not
// compare secrets byte by byte.
type auth struct {
	keys map[[32]byte]Key
}

func newAuth(keys []Key) *auth {
	if len(keys) == 0 {
		return nil
	}
	a := &auth{keys: make(map[[32]byte]Key, len(keys))}
	for _, k := range keys {
		a.keys[sha256.Sum256([]byte(k.Token))] = k
	}
	return a
}

// check returns the key of a request, or an unauthorized error.
func (a *auth) check(r *http.Request) (Key, error) {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		tok, ok = strings.CutPrefix(h, "bearer ")
	}
	if !ok || tok == "" {
		return Key{}, tether.Errorf(tether.CodeUnauthorized, "missing bearer token (Authorization: Bearer <token>)")
	}
	k, ok := a.keys[sha256.Sum256([]byte(strings.TrimSpace(tok)))]
	if !ok {
		return Key{}, tether.Errorf(tether.CodeUnauthorized, "invalid token")
	}
	return k, nil
}

// allow wraps h so that only the given roles (and admin) may call it.
func (s *Server) allow(h http.HandlerFunc, roles ...Role) http.HandlerFunc {
	if s.auth == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		k, err := s.auth.check(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="tether"`)
			s.writeError(w, r, err)
			return
		}
		if k.Role != RoleAdmin {
			ok := false
			for _, role := range roles {
				ok = ok || role == k.Role
			}
			if !ok {
				s.writeError(w, r, tether.Errorf(tether.CodeForbidden, "a %s token may not do this", k.Role))
				return
			}
		}
		h(w, r)
	}
}
