package api

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
)

// TokenOptions configure the signed tokens (JWTs) a server accepts besides
// its static keys: an app's backend, which knows who the user is, signs a
// short-lived token that says what the user may touch, and Tether checks
// it without calling back. See docs/operations.md, "Security".
type TokenOptions struct {
	// Secret is an HMAC secret (HS256, HS384, HS512); at least 32 bytes.
	// Defaults to none.
	Secret []byte
	// PublicKeys are PEM public keys (RSA, ECDSA, Ed25519), tried in
	// order for tokens signed with them (a token's kid is not needed).
	// Defaults to none.
	PublicKeys []crypto.PublicKey
	// JWKSURL is a JWKS (RFC 7517) of public keys, fetched when first
	// needed, re-fetched for a kid it does not hold (at most once per
	// JWKSMinRefetch) and, in the background, once it is JWKSRefresh old.
	// Defaults to none.
	JWKSURL string
	// JWKSRefresh is how old the fetched JWKS may get before it is
	// fetched again. Defaults to 10m.
	JWKSRefresh time.Duration
	// JWKSMinRefetch is the least time between two fetches for an unknown
	// kid, so that tokens with made-up kids cannot make Tether hammer the
	// JWKS server. Defaults to 30s.
	JWKSMinRefetch time.Duration
	// Issuer, if set, is the iss every token must have.
	Issuer string
	// Audience, if set, must be in every token's aud.
	Audience string
	// Leeway is the clock skew allowed on nbf, iat and, for requests, exp.
	// A stream still ends at exp itself. Defaults to 30s.
	Leeway time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// Logger logs failed JWKS fetches. Defaults to the server's logger.
	Logger *slog.Logger
}

// Enabled reports whether any key is configured: turning tokens on turns
// auth on.
func (o *TokenOptions) Enabled() bool {
	return o != nil && (len(o.Secret) > 0 || len(o.PublicKeys) > 0 || o.JWKSURL != "")
}

// minSecret is the shortest HMAC secret accepted: 256 bits, as RFC 7518
// asks of HS256.
const minSecret = 32

// ParsePublicKeys reads the PEM public keys of data (PKIX "PUBLIC KEY"
// blocks, and PKCS #1 "RSA PUBLIC KEY").
func ParsePublicKeys(data []byte) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		var (
			k   any
			err error
		)
		switch b.Type {
		case "PUBLIC KEY":
			k, err = x509.ParsePKIXPublicKey(b.Bytes)
		case "RSA PUBLIC KEY":
			k, err = x509.ParsePKCS1PublicKey(b.Bytes)
		default:
			return nil, fmt.Errorf("PEM block %q: want PUBLIC KEY", b.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("public key: %w", err)
		}
		switch k.(type) {
		case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
		default:
			return nil, fmt.Errorf("public key of type %T: want RSA, ECDSA or Ed25519", k)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.New("no PEM public key found")
	}
	return keys, nil
}

// verifier checks signed tokens.
type verifier struct {
	opts   TokenOptions
	parser *jwt.Parser
	jwks   *jwks
}

func newVerifier(o TokenOptions) (*verifier, error) {
	if !o.Enabled() {
		return nil, nil
	}
	if len(o.Secret) > 0 && len(o.Secret) < minSecret {
		return nil, fmt.Errorf("the JWT secret must be at least %d bytes", minSecret)
	}
	if o.Leeway <= 0 {
		o.Leeway = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	var methods []string
	if len(o.Secret) > 0 {
		methods = append(methods, "HS256", "HS384", "HS512")
	}
	if len(o.PublicKeys) > 0 || o.JWKSURL != "" {
		methods = append(methods, "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
	}
	popts := []jwt.ParserOption{jwt.WithValidMethods(methods), jwt.WithLeeway(o.Leeway),
		jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithTimeFunc(o.Now)}
	if o.Issuer != "" {
		popts = append(popts, jwt.WithIssuer(o.Issuer))
	}
	if o.Audience != "" {
		popts = append(popts, jwt.WithAudience(o.Audience))
	}
	v := &verifier{opts: o, parser: jwt.NewParser(popts...)}
	if o.JWKSURL != "" {
		v.jwks = newJWKS(o.JWKSURL, o.JWKSRefresh, o.JWKSMinRefetch, o.Now, o.Logger)
	}
	return v, nil
}

// isJWT reports whether a bearer token has the shape of a JWT: three
// dot-separated base64url segments. Anything else is a static key.
func isJWT(tok string) bool {
	if strings.Count(tok, ".") != 2 {
		return false
	}
	for _, c := range tok {
		if !(c == '.' || c == '-' || c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// claims are the claims Tether reads.
type claims struct {
	jwt.RegisteredClaims
	Tether *tetherClaim `json:"tether,omitempty"`
}

// tetherClaim is Tether's own claim (docs/operations.md, "Security").
type tetherClaim struct {
	Role    Role     `json:"role,omitempty"`
	Threads []string `json:"threads,omitempty"`
	Create  *bool    `json:"create,omitempty"`
	Run     *bool    `json:"run,omitempty"`
	Cancel  *bool    `json:"cancel,omitempty"`
	Answer  *bool    `json:"answer,omitempty"`
	Agents  []string `json:"agents,omitempty"`
}

// errTokenExpired is a JWT whose exp is past: the client refreshes it
// rather than asks the user.
var errTokenExpired = tether.Errorf(tether.CodeTokenExpired, "the token has expired")

// verify checks a JWT and returns its principal. Every failure but expiry
// is one unauthorized error, whatever the cause (its cause is not told to
// the client).
func (v *verifier) verify(tok string) (Principal, error) {
	var c claims
	_, err := v.parser.ParseWithClaims(tok, &c, v.key)
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return Principal{}, errTokenExpired
	case err != nil:
		return Principal{}, tether.Wrap(err, tether.CodeUnauthorized, "invalid token")
	case c.Subject == "":
		return Principal{}, tether.Errorf(tether.CodeUnauthorized, "invalid token: sub is required")
	}
	return principalOfClaims(&c)
}

// key finds the key that should have signed t.
func (v *verifier) key(t *jwt.Token) (any, error) {
	switch t.Method.(type) {
	case *jwt.SigningMethodHMAC:
		return v.opts.Secret, nil
	}
	kid, _ := t.Header["kid"].(string)
	var set jwt.VerificationKeySet
	for _, k := range v.opts.PublicKeys {
		if fits(t.Method, k) {
			set.Keys = append(set.Keys, k)
		}
	}
	if v.jwks != nil {
		set.Keys = append(set.Keys, v.jwks.lookup(kid, t.Method)...)
	}
	if len(set.Keys) == 0 {
		return nil, fmt.Errorf("no key for alg %s kid %q", t.Method.Alg(), kid)
	}
	return set, nil
}

// fits reports whether a public key can verify a signing method.
func fits(m jwt.SigningMethod, k crypto.PublicKey) bool {
	switch k.(type) {
	case *rsa.PublicKey:
		switch m.(type) {
		case *jwt.SigningMethodRSA, *jwt.SigningMethodRSAPSS:
			return true
		}
	case *ecdsa.PublicKey:
		_, ok := m.(*jwt.SigningMethodECDSA)
		return ok
	case ed25519.PublicKey:
		_, ok := m.(*jwt.SigningMethodEd25519)
		return ok
	}
	return false
}

func principalOfClaims(c *claims) (Principal, error) {
	tc := c.Tether
	if tc == nil {
		tc = &tetherClaim{}
	}
	p := Principal{ID: "sub:" + c.Subject, Sub: c.Subject, Role: tc.Role, JWT: true,
		Threads: tc.Threads, Agents: tc.Agents,
		Create: flag(tc.Create), Run: flag(tc.Run), Cancel: flag(tc.Cancel), Answer: flag(tc.Answer)}
	if c.Issuer != "" {
		p.ID = "sub:" + c.Issuer + "|" + c.Subject
	}
	if c.ExpiresAt != nil {
		p.Expires = c.ExpiresAt.Time
	}
	switch p.Role {
	case "":
		p.Role = RoleClient
	case RoleClient, RoleWorker, RoleAdmin:
	default:
		return Principal{}, tether.Errorf(tether.CodeUnauthorized, "invalid token: tether.role must be client, worker or admin")
	}
	for _, pat := range p.Threads {
		if !validPattern(pat) {
			return Principal{}, tether.Errorf(tether.CodeUnauthorized, "invalid token: tether.threads holds %q, which is neither an id nor a prefix ending in *", clip.String(pat, 64))
		}
	}
	// A lease is bound to the identity that claimed it: a worker token's
	// leases carry its subject, so that a refreshed token of the same
	// worker goes on appending to the runs it holds.
	p.LeaseID = leaseIDOf(p.ID)
	return p, nil
}

// flag is an optional boolean of the claim, true when absent.
func flag(b *bool) bool { return b == nil || *b }
