package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"time"

	tether "github.com/tetherhq/tether"
)

// DefaultTokenRefreshAhead is how long before a JWT's exp the client asks
// Options.TokenFunc for a new token, when Options leaves it zero.
const DefaultTokenRefreshAhead = 30 * time.Second

// tokenKeeper holds a client's bearer token: Options.Token as it is, or
// what Options.TokenFunc returned. A token that is a JWT with an exp is
// kept until shortly before that time (DefaultTokenRefreshAhead, at most
// half of the lifetime the client saw, so that a short-lived token is not
// asked for again at once) and then asked for again, so that requests and
// reconnects never wait on an expired one; the server's token_expired (a
// 401 code, an SSE reconnect reason) drops it at once. Anything else the
// function returns is asked for at each request: the client cannot tell
// when it ends. The client never verifies a token; it only reads exp.
//
// One call of the function at a time, however many requests wait for it.
type tokenKeeper struct {
	static string
	fn     func(context.Context) (string, error)
	ahead  time.Duration
	now    func() time.Time // the clock refresh times are read by

	mu      sync.Mutex
	held    bool
	token   string
	refresh time.Time   // when to ask again; zero: at each request
	exp     time.Time   // the held token's exp, when it is a JWT with one
	flight  *tokenFetch // the call of fn in progress, if any
}

// tokenFetch is one call of the token function, which the requests that
// need a token meanwhile wait for.
type tokenFetch struct {
	done   chan struct{}
	token  string
	err    error
	gaveUp bool // the caller that made it left (its ctx ended): others ask again
}

func newTokenKeeper(o *Options) *tokenKeeper {
	k := &tokenKeeper{static: o.Token, fn: o.TokenFunc, ahead: o.TokenRefreshAhead, now: time.Now}
	if k.ahead <= 0 {
		k.ahead = DefaultTokenRefreshAhead
	}
	return k
}

// refreshable reports whether a new token can be had.
func (k *tokenKeeper) refreshable() bool { return k.fn != nil }

// get returns the token to send now ("" sends none). It returns an error
// with code token_unavailable if the token function fails, or ctx's error.
func (k *tokenKeeper) get(ctx context.Context) (string, error) {
	if k.fn == nil {
		return k.static, nil
	}
	for {
		k.mu.Lock()
		if k.held && !k.refresh.IsZero() && k.now().Before(k.refresh) {
			tok := k.token
			k.mu.Unlock()
			return tok, nil
		}
		if f := k.flight; f != nil {
			k.mu.Unlock()
			select {
			case <-f.done:
				if f.gaveUp && ctx.Err() == nil {
					continue
				}
				return f.token, f.err
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		f := &tokenFetch{done: make(chan struct{})}
		k.flight = f
		k.mu.Unlock()
		k.fetch(ctx, f)
		return f.token, f.err
	}
}

// fetch calls the token function for f, on the caller's goroutine (with
// its context; a panic goes up to it, as it would without the keeper).
func (k *tokenKeeper) fetch(ctx context.Context, f *tokenFetch) {
	completed := false
	defer func() {
		if !completed { // fn panicked: the waiters ask again
			f.err, f.gaveUp = tether.Errorf(CodeTokenUnavailable, "the token function panicked"), true
		}
		k.mu.Lock()
		if f.err == nil {
			k.keep(f.token)
		}
		k.flight = nil
		k.mu.Unlock()
		close(f.done)
	}()
	tok, err := k.fn(ctx)
	completed = true
	if err != nil {
		k.mu.Lock()
		valid := k.held && !k.exp.IsZero() && k.now().Before(k.exp)
		held := k.token
		k.mu.Unlock()
		if valid && ctx.Err() == nil {
			// Asked ahead of the exp and failed (its endpoint down for a
			// moment): the token held is still good. It is sent, and kept
			// until halfway to its exp (keep), when the function is asked
			// again; the request does not fail for a refresh it did not need.
			f.token = held
			return
		}
		f.err = tether.Wrap(err, CodeTokenUnavailable, "the token function failed")
		f.gaveUp = ctx.Err() != nil
		return
	}
	f.token = tok
}

// keep holds tok and works out when to ask for the next. k.mu is held.
func (k *tokenKeeper) keep(tok string) {
	k.token, k.held, k.refresh, k.exp = tok, true, time.Time{}, time.Time{}
	exp, ok := jwtExpiry(tok)
	if !ok {
		return
	}
	k.exp = exp
	now := k.now()
	if life := exp.Sub(now); life > 0 {
		k.refresh = exp.Add(-min(k.ahead, life/2))
	}
	// An exp already past leaves refresh zero: asked for again at the next
	// request (the server may still take it within its leeway).
}

// expired drops tok, which the server said has expired: the next get asks
// for a new token, unless another one came meanwhile.
func (k *tokenKeeper) expired(tok string) {
	if k.fn == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held && k.token == tok {
		k.held = false
	}
}

// refreshTime returns when the held token should be replaced: set for a
// JWT with an exp from the token function.
func (k *tokenKeeper) refreshTime() (time.Time, bool) {
	if k.fn == nil {
		return time.Time{}, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.refresh, k.held && !k.refresh.IsZero()
}

// maxExp caps an exp read from a token (the year 9999): a larger one is as
// good as never, and would overflow the conversion to a time. An exp below
// zero is read as zero (long past).
const maxExp = 253402300799

// jwtExpiry returns the exp of a JWT, read from its payload without
// verifying anything (the server verifies; the client only needs to know
// when to ask for a new one). ok is false for anything that is not three
// dot-separated parts whose second is base64url JSON with a numeric exp.
func jwtExpiry(tok string) (exp time.Time, ok bool) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || parts[1] == "" {
		return time.Time{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, false
	}
	var p struct {
		Exp *float64 `json:"exp"`
	}
	if json.Unmarshal(raw, &p) != nil || p.Exp == nil {
		return time.Time{}, false
	}
	sec := max(min(*p.Exp, maxExp), 0)
	whole, frac := math.Modf(sec)
	return time.Unix(int64(whole), int64(frac*1e9)), true
}
