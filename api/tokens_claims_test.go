package api_test

import (
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
)

// The registered claims: sub and exp required; nbf and iat with a 30 s
// leeway; iss and aud when configured; Tether's claim's role and patterns
// checked. Each refusal is unauthorized, but expiry, which is
// token_expired.
func TestTokenClaims(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	o := api.TokenOptions{Secret: tkSecret, Issuer: "https://app.example", Audience: "chat", Now: func() time.Time { return now }}
	base := func() jwt.MapClaims {
		return jwt.MapClaims{"sub": "alice", "iss": "https://app.example", "aud": "chat", "exp": now.Add(time.Minute).Unix()}
	}
	with := func(k string, v any) jwt.MapClaims {
		m := base()
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, c := range []struct {
		name   string
		claims jwt.MapClaims
		want   tether.Code // "" : accepted
	}{
		{"valid", base(), ""},
		{"no sub", with("sub", nil), tether.CodeUnauthorized},
		{"no exp", with("exp", nil), tether.CodeUnauthorized},
		{"expired", with("exp", now.Add(-time.Minute).Unix()), tether.CodeTokenExpired},
		{"expired within the leeway", with("exp", now.Add(-20*time.Second).Unix()), ""},
		{"nbf ahead", with("nbf", now.Add(time.Minute).Unix()), tether.CodeUnauthorized},
		{"nbf within the leeway", with("nbf", now.Add(20*time.Second).Unix()), ""},
		{"iat ahead", with("iat", now.Add(time.Minute).Unix()), tether.CodeUnauthorized},
		{"another issuer", with("iss", "https://evil.example"), tether.CodeUnauthorized},
		{"no issuer", with("iss", nil), tether.CodeUnauthorized},
		{"another audience", with("aud", "other"), tether.CodeUnauthorized},
		{"audiences", with("aud", []string{"other", "chat"}), ""},
		{"bad role", with("tether", map[string]any{"role": "root"}), tether.CodeUnauthorized},
		{"bad pattern", with("tether", map[string]any{"threads": []string{"a*b"}}), tether.CodeUnauthorized},
		{"empty pattern", with("tether", map[string]any{"threads": []string{""}}), tether.CodeUnauthorized},
		{"claim of the wrong type", with("tether", "admin"), tether.CodeUnauthorized},
	} {
		tok := mint(t, nil, c.claims)
		p, err := api.VerifyToken(o, tok)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && tether.CodeOf(err) != c.want:
			t.Errorf("%s: %+v, %v; want %s", c.name, p, err, c.want)
		}
	}
	// The principal of a token with Tether's claim.
	p, err := api.VerifyToken(o, mint(t, nil, with("tether", map[string]any{"role": "worker", "agents": []string{"x"}, "run": false, "threads": []string{"t-*"}})))
	if err != nil || p.Role != api.RoleWorker || p.ID != "sub:https://app.example|alice" || p.Run || !p.Create || len(p.Agents) != 1 || p.Threads[0] != "t-*" || !p.Expires.Equal(now.Add(time.Minute)) {
		t.Fatalf("principal %+v, %v", p, err)
	}
	// Unsigned ("none") and a public-key algorithm without public keys.
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, base()).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if _, err := api.VerifyToken(o, none); tether.CodeOf(err) != tether.CodeUnauthorized {
		t.Errorf("alg none: %v", err)
	}
	if _, err := api.TokenVerifier(api.TokenOptions{Secret: []byte("short")}); err == nil {
		t.Error("a secret of 5 bytes was accepted")
	}
}
