package wake

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// keys are the manager's secrets: the Ed25519 key that signs webhook
// notifications (its public half is served as a JWKS) and the HMAC key of
// wake tokens, derived from it so that both survive a restart together.
type keys struct {
	priv     ed25519.PrivateKey
	kid      string
	x        string // the public key, base64url
	tokenKey []byte
}

func newKeys(priv ed25519.PrivateKey) *keys {
	pub := priv.Public().(ed25519.PublicKey)
	k := &keys{priv: priv, x: base64.RawURLEncoding.EncodeToString(pub)}
	// The key ID is the RFC 7638 thumbprint of the public JWK.
	thumb := sha256.Sum256([]byte(`{"crv":"Ed25519","kty":"OKP","x":"` + k.x + `"}`))
	k.kid = "ds_" + base64.RawURLEncoding.EncodeToString(thumb[:])
	mac := hmac.New(sha256.New, priv.Seed())
	mac.Write([]byte("tether wake tokens"))
	k.tokenKey = mac.Sum(nil)
	return k
}

// JWK is a public key as served at __ds/jwks.json.
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
}

// JWKS is a set of public keys.
type JWKS struct {
	Keys []JWK `json:"keys"`
}

func (k *keys) jwks() JWKS {
	return JWKS{Keys: []JWK{{Kty: "OKP", Crv: "Ed25519", X: k.x, Kid: k.kid, Use: "sig", Alg: "EdDSA"}}}
}

// sign returns the Webhook-Signature header of a body sent at t:
// "t=<unix seconds>,kid=<key id>,ed25519=<base64url signature of "t.body">".
func (k *keys) sign(body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	msg := make([]byte, 0, len(ts)+1+len(body))
	msg = append(append(append(msg, ts...), '.'), body...)
	sig := ed25519.Sign(k.priv, msg)
	return "t=" + ts + ",kid=" + k.kid + ",ed25519=" + base64.RawURLEncoding.EncodeToString(sig)
}

// tokenClaims are what a wake token says: the subscription, the wake
// generation it was issued for, and its expiry.
type tokenClaims struct {
	Sub   string `json:"sub"`
	Epoch int64  `json:"epoch"`
	Exp   int64  `json:"exp"`
	JTI   string `json:"jti"`
}

// tokenTTL is how long a wake token is valid.
const tokenTTL = time.Hour

// token issues a wake token: base64url(claims) "." base64url(HMAC).
func (k *keys) token(sub string, generation int64, now time.Time) string {
	var jti [8]byte
	_, _ = rand.Read(jti[:])
	c, _ := json.Marshal(tokenClaims{Sub: sub, Epoch: generation, Exp: now.Add(tokenTTL).Unix(), JTI: hex.EncodeToString(jti[:])})
	p := base64.RawURLEncoding.EncodeToString(c)
	return p + "." + k.mac(p)
}

func (k *keys) mac(payload string) string {
	m := hmac.New(sha256.New, k.tokenKey)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// errTokenExpired and errTokenInvalid are what check returns.
var (
	errTokenInvalid = fmt.Errorf("token invalid")
	errTokenExpired = fmt.Errorf("token expired")
)

// check verifies a wake token of subscription sub and returns its
// generation.
func (k *keys) check(token, sub string, now time.Time) (int64, error) {
	p, sig, ok := strings.Cut(token, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(k.mac(p))) {
		return 0, errTokenInvalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return 0, errTokenInvalid
	}
	var c tokenClaims
	if err := json.Unmarshal(raw, &c); err != nil || c.Sub != sub {
		return 0, errTokenInvalid
	}
	if now.Unix() > c.Exp {
		return 0, errTokenExpired
	}
	return c.Epoch, nil
}

// NewSigningKey returns a new Ed25519 key for webhook signatures.
func NewSigningKey() ed25519.PrivateKey {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	return priv
}

// newWakeID returns a new wake ID.
func newWakeID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "w_" + hex.EncodeToString(b[:])
}
