package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/tetherhq/tether/api"
)

// tokenFlags are the flags of signed tokens (JWTs) for users.
type tokenFlags struct {
	secretFile       string
	publicKeys       []string
	jwksURL          string
	issuer, audience string
}

// loadTokens reads the token flags' files into api.TokenOptions, and
// refuses what would make every token fail: a short secret, a file without
// a public key, a JWKS URL that is not http(s).
func loadTokens(f tokenFlags) (api.TokenOptions, error) {
	o := api.TokenOptions{JWKSURL: f.jwksURL, Issuer: f.issuer, Audience: f.audience}
	if f.secretFile != "" {
		b, err := os.ReadFile(f.secretFile)
		if err != nil {
			return o, fmt.Errorf("--jwt-secret-file: %w", err)
		}
		o.Secret = []byte(strings.TrimRight(string(b), " \t\r\n"))
		if len(o.Secret) < 32 {
			return o, errors.New("--jwt-secret-file: the secret must be at least 32 bytes")
		}
	}
	for _, path := range f.publicKeys {
		b, err := os.ReadFile(path)
		if err != nil {
			return o, fmt.Errorf("--jwt-public-key: %w", err)
		}
		keys, err := api.ParsePublicKeys(b)
		if err != nil {
			return o, fmt.Errorf("--jwt-public-key %s: %w", path, err)
		}
		o.PublicKeys = append(o.PublicKeys, keys...)
	}
	if f.jwksURL != "" {
		u, err := url.Parse(f.jwksURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return o, fmt.Errorf("--jwks-url: want an http(s) URL, got %q", f.jwksURL)
		}
	}
	if (f.issuer != "" || f.audience != "") && !o.Enabled() {
		return o, errors.New("--jwt-issuer and --jwt-audience need --jwt-secret-file, --jwt-public-key or --jwks-url")
	}
	return o, nil
}
