package api_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
)

// FuzzVerifyToken checks arbitrary bearer tokens, and tokens correctly
// signed over arbitrary claims. Nothing panics; a token is refused with
// unauthorized or token_expired, whose message never echoes the token, or
// accepted with a subject, a known role, an exp, and thread patterns that
// are ids or prefixes.
func FuzzVerifyToken(f *testing.F) {
	now := time.Unix(1_800_000_000, 0)
	o := api.TokenOptions{Secret: tkSecret, Now: func() time.Time { return now }}
	sign := func(claims string) string {
		var m jwt.MapClaims
		if json.Unmarshal([]byte(claims), &m) != nil {
			return ""
		}
		s, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, m).SignedString(tkSecret)
		return s
	}
	for _, c := range []string{
		`{"sub":"alice","exp":1800000600}`,
		`{"sub":"alice","exp":1800000600,"tether":{"role":"worker","agents":["x"]}}`,
		`{"sub":"alice","exp":1800000600,"tether":{"threads":["t-*","*","a"],"run":false}}`,
		`{"sub":"alice","exp":1799999000}`, `{"exp":1800000600}`, `{"sub":"a"}`,
		`{"sub":"a","exp":1800000600,"tether":{"role":"root"}}`, `{"sub":"a","exp":1800000600,"tether":{"threads":["a*b"]}}`,
		`{"sub":"a","exp":1800000600,"nbf":1900000000}`, `{"sub":"a","exp":"soon"}`, `{"sub":1,"exp":1800000600}`,
		`{"sub":"a","exp":1800000600,"tether":[]}`,
	} {
		f.Add(c, sign(c))
	}
	f.Add("", "a.b.c")
	f.Add("", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIiwiZXhwIjoxODAwMDAwNjAwfQ.")
	f.Fuzz(func(t *testing.T, claims, raw string) {
		for _, tok := range []string{raw, sign(claims)} {
			if tok == "" {
				continue
			}
			p, err := api.VerifyToken(o, tok)
			if err != nil {
				var te *tether.Error
				if !errors.As(err, &te) || (te.Code != tether.CodeUnauthorized && te.Code != tether.CodeTokenExpired) {
					t.Fatalf("token %q: error %v", tok, err)
				}
				if len(tok) > 8 && strings.Contains(te.Message, tok) {
					t.Fatalf("the error %q echoes the token", te.Message)
				}
				continue
			}
			if p.Sub == "" || p.Expires.IsZero() || !strings.HasPrefix(p.ID, "sub:") {
				t.Fatalf("token %q accepted as %+v", tok, p)
			}
			switch p.Role {
			case api.RoleClient, api.RoleWorker, api.RoleAdmin:
			default:
				t.Fatalf("token %q accepted with role %q", tok, p.Role)
			}
			for _, pat := range p.Threads {
				if strings.Contains(strings.TrimSuffix(pat, "*"), "*") {
					t.Fatalf("token %q accepted with pattern %q", tok, pat)
				}
			}
		}
	})
}
