package api

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// jwks is a JWKS fetched from a URL and cached. Keys rotate without a
// restart: a token whose kid the cache does not hold makes it fetch the
// set again (at most once per minRefetch, so that made-up kids cannot turn
// Tether into a load generator against the JWKS server), and the set is
// fetched again in the background once it is older than refresh. A fetch
// that fails keeps the keys held.
type jwks struct {
	url        string
	refresh    time.Duration
	minRefetch time.Duration
	now        func() time.Time
	client     *http.Client
	log        *slog.Logger

	mu      sync.Mutex
	set     map[string]crypto.PublicKey // by kid ("" for keys without one)
	fetched time.Time                   // of the last fetch tried
	loaded  bool                        // a fetch has succeeded
	busy    chan struct{}               // closed when the fetch in flight ends
}

func newJWKS(url string, refresh, minRefetch time.Duration, now func() time.Time, log *slog.Logger) *jwks {
	if refresh <= 0 {
		refresh = 10 * time.Minute
	}
	if minRefetch <= 0 {
		minRefetch = 30 * time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	return &jwks{url: url, refresh: refresh, minRefetch: minRefetch, now: now, log: log,
		client: &http.Client{Timeout: 10 * time.Second}}
}

// lookup returns the keys that may have signed a token with this kid and
// method: the key of that kid, or every fitting key for a token without
// one.
func (j *jwks) lookup(kid string, m jwt.SigningMethod) []jwt.VerificationKey {
	j.mu.Lock()
	now := j.now()
	_, known := j.set[kid]
	switch {
	case j.busy != nil && !j.loaded,
		(!j.loaded || kid != "" && !known) && (j.fetched.IsZero() || now.Sub(j.fetched) >= j.minRefetch):
		// Wait for a fetch: without it the token is refused.
		ch := j.fetchLocked()
		j.mu.Unlock()
		<-ch
		j.mu.Lock()
	case j.loaded && now.Sub(j.fetched) >= j.refresh:
		j.fetchLocked() // in the background; the keys held serve meanwhile
	}
	defer j.mu.Unlock()
	var out []jwt.VerificationKey
	for k, pub := range j.set {
		if (kid == "" || k == kid) && fits(m, pub) {
			out = append(out, pub)
		}
	}
	return out
}

// fetchLocked starts a fetch unless one is in flight, and returns the
// channel closed when it ends. j.mu is held.
func (j *jwks) fetchLocked() <-chan struct{} {
	if j.busy != nil {
		return j.busy
	}
	ch := make(chan struct{})
	j.busy = ch
	j.fetched = j.now()
	go func() {
		keys, err := j.fetch()
		j.mu.Lock()
		if err != nil {
			j.log.Warn("JWKS fetch failed; the keys held stay in use", "url", j.url, "err", err)
		} else {
			j.set, j.loaded = keys, true
		}
		j.busy = nil
		j.mu.Unlock()
		close(ch)
	}()
	return ch
}

// maxJWKS bounds the size of a JWKS document.
const maxJWKS = 1 << 20

func (j *jwks) fetch() (map[string]crypto.PublicKey, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	res, err := j.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", res.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, maxJWKS+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxJWKS {
		return nil, errors.New("the JWKS is larger than 1 MiB")
	}
	return parseJWKS(b)
}

// jwk is one key of a JWKS (RFC 7517, 7518, 8037): the members Tether
// reads.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// parseJWKS reads the signature keys of a JWKS; keys of other uses or
// kinds are skipped (a set may hold encryption keys too).
func parseJWKS(b []byte) (map[string]crypto.PublicKey, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("JWKS: %w", err)
	}
	keys := make(map[string]crypto.PublicKey, len(set.Keys))
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		pub, err := k.publicKey()
		if err != nil {
			return nil, fmt.Errorf("JWKS key %q: %w", k.Kid, err)
		}
		if pub != nil {
			keys[k.Kid] = pub
		}
	}
	return keys, nil
}

func (k jwk) publicKey() (crypto.PublicKey, error) {
	b64 := base64.RawURLEncoding.DecodeString
	switch k.Kty {
	case "RSA":
		n, err1 := b64(k.N)
		e, err2 := b64(k.E)
		if err := errors.Join(err1, err2); err != nil || len(n) == 0 || len(e) == 0 || len(e) > 4 {
			return nil, errors.New("bad RSA n or e")
		}
		return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}, nil
	case "EC":
		var c elliptic.Curve
		switch k.Crv {
		case "P-256":
			c = elliptic.P256()
		case "P-384":
			c = elliptic.P384()
		case "P-521":
			c = elliptic.P521()
		default:
			return nil, nil // a curve JWTs do not sign with here
		}
		x, err1 := b64(k.X)
		y, err2 := b64(k.Y)
		if err := errors.Join(err1, err2); err != nil {
			return nil, errors.New("bad EC x or y")
		}
		size := (c.Params().BitSize + 7) / 8
		if len(x) != size || len(y) != size {
			return nil, errors.New("bad EC x or y")
		}
		// Parse the uncompressed point, which checks it is on the curve.
		pub, err := ecdsa.ParseUncompressedPublicKey(c, append(append([]byte{4}, x...), y...))
		if err != nil {
			return nil, err
		}
		return pub, nil
	case "OKP":
		if k.Crv != "Ed25519" {
			return nil, nil
		}
		x, err := b64(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, errors.New("bad Ed25519 x")
		}
		return ed25519.PublicKey(x), nil
	}
	return nil, nil // another kind (oct, …): not a public signature key
}
