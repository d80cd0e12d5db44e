package api_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tetherhq/tether/api"
)

// jwkOf is the JWK of a public key.
func jwkOf(kid string, pub crypto.PublicKey) map[string]any {
	b64 := base64.RawURLEncoding.EncodeToString
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return map[string]any{"kty": "RSA", "kid": kid, "use": "sig", "n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
	case *ecdsa.PublicKey:
		b, _ := k.Bytes() // 0x04 || x || y
		n := (len(b) - 1) / 2
		return map[string]any{"kty": "EC", "kid": kid, "crv": k.Curve.Params().Name, "x": b64(b[1 : 1+n]), "y": b64(b[1+n:])}
	case ed25519.PublicKey:
		return map[string]any{"kty": "OKP", "kid": kid, "crv": "Ed25519", "x": b64(k)}
	}
	panic("key type")
}

// signAs signs claims with key under method, with a kid if not empty.
func signAs(t testing.TB, m jwt.SigningMethod, key crypto.Signer, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tk := jwt.NewWithClaims(m, claims)
	if kid != "" {
		tk.Header["kid"] = kid
	}
	s, err := tk.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// jwksServer serves a JWKS that the test changes, and counts fetches.
type jwksServer struct {
	mu      sync.Mutex
	keys    []map[string]any
	fetches atomic.Int32
}

func (j *jwksServer) set(keys ...map[string]any) {
	j.mu.Lock()
	j.keys = keys
	j.mu.Unlock()
}

func (j *jwksServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	j.fetches.Add(1)
	j.mu.Lock()
	b, _ := json.Marshal(map[string]any{"keys": j.keys})
	j.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// Key rotation: a token signed with a new kid is accepted once the JWKS
// holds it, without a restart; an unknown kid makes the server fetch the
// JWKS again, at most once per JWKSMinRefetch however many tokens with
// unknown kids come; a key removed from the JWKS stops working once the
// set is fetched again.
func TestJWKSRotation(t *testing.T) {
	var clk clock
	js := &jwksServer{}
	hs := httptest.NewServer(js)
	defer hs.Close()
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	js.set(jwkOf("k1", &rsaKey.PublicKey))
	v := newAuthEnv(t, api.Options{Tokens: api.TokenOptions{JWKSURL: hs.URL, Audience: tkAudience, Now: clk.now}})

	claims := func() jwt.MapClaims { return userClaims(&clk, "alice", nil) }
	get := func(tok string) int { return v.do("GET", "/v1/threads", nil, bearer(tok)...).status }

	if s := get(signAs(t, jwt.SigningMethodRS256, rsaKey, "k1", claims())); s != 200 {
		t.Fatalf("token of k1: %d", s)
	}
	// k2 is not published yet: refused, and however many such tokens
	// come, the JWKS is fetched at most once more meanwhile.
	before := js.fetches.Load()
	for range 5 {
		if s := get(signAs(t, jwt.SigningMethodES256, ecKey, "k2", claims())); s != 401 {
			t.Fatalf("token of an unpublished kid: %d", s)
		}
	}
	if n := js.fetches.Load() - before; n > 1 {
		t.Fatalf("%d JWKS fetches for unknown kids within the rate limit", n)
	}

	// The issuer rotates: k2 in, k1 out.
	js.set(jwkOf("k2", &ecKey.PublicKey))
	clk.advance(31 * time.Second) // past JWKSMinRefetch
	if s := get(signAs(t, jwt.SigningMethodES256, ecKey, "k2", claims())); s != 200 {
		t.Fatalf("token of the new kid after the JWKS changed: %d", s)
	}
	if s := get(signAs(t, jwt.SigningMethodRS256, rsaKey, "k1", claims())); s != 401 {
		t.Fatalf("token of the removed kid: %d", s)
	}
	// The same key under the wrong algorithm family, or a made-up kid.
	if s := get(signAs(t, jwt.SigningMethodRS256, rsaKey, "k2", claims())); s != 401 {
		t.Fatalf("RS256 token naming an EC kid: %d", s)
	}
}

// PEM public keys (RSA, ECDSA, Ed25519) verify tokens signed with their
// private keys, with no kid; an HS256 token whose secret is a public key's
// PEM (the algorithm confusion attack) is refused.
func TestPEMPublicKeys(t *testing.T) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	var pemAll []byte
	for _, pub := range []crypto.PublicKey{&rsaKey.PublicKey, &ecKey.PublicKey, edKey.Public()} {
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		pemAll = append(pemAll, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})...)
	}
	keys, err := api.ParsePublicKeys(pemAll)
	if err != nil || len(keys) != 3 {
		t.Fatalf("ParsePublicKeys: %d keys, %v", len(keys), err)
	}
	var clk clock
	v := newAuthEnv(t, api.Options{Tokens: api.TokenOptions{PublicKeys: keys, Now: clk.now}})
	claims := func() jwt.MapClaims { return jwt.MapClaims{"sub": "alice", "exp": clk.now().Add(time.Hour).Unix()} }
	for _, c := range []struct {
		name string
		m    jwt.SigningMethod
		key  crypto.Signer
	}{
		{"RS256", jwt.SigningMethodRS256, rsaKey}, {"PS256", jwt.SigningMethodPS256, rsaKey},
		{"ES384", jwt.SigningMethodES384, ecKey}, {"EdDSA", jwt.SigningMethodEdDSA, edKey},
	} {
		if r := v.do("GET", "/v1/threads", nil, bearer(signAs(t, c.m, c.key, "", claims()))...); r.status != 200 {
			t.Errorf("%s token: %d %s", c.name, r.status, r.body)
		}
	}
	confused := mint(t, pemAll, claims())
	if r := v.do("GET", "/v1/threads", nil, bearer(confused)...); r.status != 401 {
		t.Errorf("HS256 token signed with the public keys: %d %s", r.status, r.body)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if r := v.do("GET", "/v1/threads", nil, bearer(signAs(t, jwt.SigningMethodES384, other, "", claims()))...); r.status != 401 {
		t.Errorf("token of an unknown key: %d %s", r.status, r.body)
	}
}
