package api

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tetherhq/tether/store"
)

// Principal is who a request comes from: a static key (--keys, --token), a
// signed token (JWT), or nobody when auth is off. guard puts it on the
// request's context (PrincipalFrom).
type Principal struct {
	// ID names the principal for counters and logs: "sub:<sub>" for a JWT
	// ("sub:<iss>|<sub>" when it has an iss), "key:<key id>" for a static
	// key, "anon" with auth off.
	ID   string
	Role Role
	// JWT is set for a signed token. Only then do the fields below limit
	// anything: a static key of a role may do all that role may.
	JWT bool
	// Sub is the JWT's subject, the owner of the threads it creates.
	Sub string
	// Threads are the patterns of the threads the token may touch besides
	// its own (exact IDs, or prefixes ending in "*").
	Threads []string
	// Create, Run, Cancel and Answer say whether the token may create
	// threads, start runs, cancel them and answer their input requests.
	Create, Run, Cancel, Answer bool
	// Agents are the agents a worker token may claim runs of; empty: any.
	Agents []string
	// Expires is the JWT's exp: streams end there (token_expired). Zero
	// for a static key.
	Expires time.Time

	// LeaseID is what the leases this principal claims are bound to
	// (store.Lease.KeyID): a digest of the key or of the JWT's subject.
	LeaseID string
	// Name names a static key in logs.
	Name string
}

type principalCtx struct{}

// PrincipalFrom returns the principal of a request's context, and false
// when there is none (auth off or an open route).
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalCtx{}).(Principal)
	return p, ok
}

func withPrincipal(r *http.Request, p Principal) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), principalCtx{}, p))
}

// principalOf returns the principal a request was let in with: the
// anonymous admin when auth is off (or the route is open).
func principalOf(r *http.Request) Principal {
	if p, ok := PrincipalFrom(r.Context()); ok {
		return p
	}
	return anon
}

// anon is the principal of every request when auth is off: it may do
// everything, as an admin key may.
var anon = Principal{ID: "anon", Role: RoleAdmin}

func keyPrincipal(k Key) Principal {
	return Principal{ID: "key:" + k.id, Role: k.Role, LeaseID: k.id, Name: k.Name}
}

// leaseIDOf names a JWT's principal in leases, as keyID names a key.
func leaseIDOf(id string) string {
	sum := sha256.Sum256([]byte("tether lease principal\x00" + id))
	return "j_" + base64.RawURLEncoding.EncodeToString(sum[:16])
}

// scoped reports whether the principal's rights depend on the thread: a
// JWT of a client.
func (p Principal) scoped() bool { return p.JWT && p.Role == RoleClient }

// sees reports whether the principal may see a thread of this owner and
// ID: every thread for a static key, an admin or anon; for a client JWT
// those it owns and those its patterns match, the rule listings apply in
// the stores (store.Visibility).
func (p Principal) sees(owner, id string) bool {
	return !p.scoped() || p.visibility().Allows(owner, id)
}

// visibility is the listing filter of the principal: nil when it sees
// every thread.
func (p Principal) visibility() *store.Visibility {
	if !p.scoped() {
		return nil
	}
	return &store.Visibility{Owner: p.Sub, Patterns: p.Threads}
}

// mayClaim reports whether a worker token may claim runs of every agent of
// agents.
func (p Principal) mayClaim(agents []string) bool {
	if !p.JWT || p.Role != RoleWorker || len(p.Agents) == 0 {
		return true
	}
	for _, a := range agents {
		if !slices.Contains(p.Agents, a) {
			return false
		}
	}
	return true
}

// validPattern: an ID, or a prefix followed by "*". A prefix may hold "/"
// (Durable Streams paths); thread IDs never do.
func validPattern(p string) bool {
	if p == "*" {
		return true // every thread
	}
	p = strings.TrimSuffix(p, "*")
	return p != "" && !strings.Contains(p, "*") && len(p) <= 1024
}

func matchAny(patterns []string, id string) bool {
	for _, p := range patterns {
		if store.MatchPattern(p, id) {
			return true
		}
	}
	return false
}

// ownerOf is the owner of the threads p creates: a JWT's subject, or none.
func ownerOf(p Principal) string {
	if p.JWT {
		return p.Sub
	}
	return ""
}

type rightsCtx struct{}

// withRights gives a stream route's handler the check of the token's
// rights on what the route names, left to it by guard (route.stream).
func withRights(r *http.Request, check func(context.Context) error) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), rightsCtx{}, check))
}

// rightsOf is the check withRights gave r, nil if guard made it itself.
func rightsOf(r *http.Request) func(context.Context) error {
	check, _ := r.Context().Value(rightsCtx{}).(func(context.Context) error)
	return check
}
