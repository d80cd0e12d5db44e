package api_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tetherhq/tether/api"
)

// BenchmarkVerifyToken is the cost a signed token adds to each request:
// parsing, the signature and the claims, per algorithm.
func BenchmarkVerifyToken(b *testing.B) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	claims := jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix(), "tether": map[string]any{"threads": []string{"team7-*"}}}
	for _, c := range []struct {
		name string
		m    jwt.SigningMethod
		key  any
		pub  crypto.PublicKey
	}{
		{"HS256", jwt.SigningMethodHS256, tkSecret, nil},
		{"RS256", jwt.SigningMethodRS256, rsaKey, &rsaKey.PublicKey},
		{"ES256", jwt.SigningMethodES256, ecKey, &ecKey.PublicKey},
		{"EdDSA", jwt.SigningMethodEdDSA, edKey, edKey.Public()},
	} {
		b.Run(c.name, func(b *testing.B) {
			o := api.TokenOptions{Secret: tkSecret}
			if c.pub != nil {
				o = api.TokenOptions{PublicKeys: []crypto.PublicKey{c.pub}}
			}
			verify, err := api.TokenVerifier(o)
			if err != nil {
				b.Fatal(err)
			}
			tok, err := jwt.NewWithClaims(c.m, claims).SignedString(c.key)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := verify(tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
