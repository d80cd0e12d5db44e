package testutil

import (
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// JWTSecret is the HMAC secret of tests' signed tokens: give it to
// api.TokenOptions.Secret and sign with Mint.
var JWTSecret = []byte("a-test-secret-of-at-least-32-bytes!!")

// Mint signs claims with HS256 and key (JWTSecret if nil). exp, aud and
// the time fields are the caller's.
func Mint(t testing.TB, key []byte, claims jwt.MapClaims) string {
	t.Helper()
	if key == nil {
		key = JWTSecret
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
