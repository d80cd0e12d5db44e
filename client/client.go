package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	tether "github.com/tetherhq/tether"
)

// Options configure a Client. The zero value (or nil) gives the defaults.
type Options struct {
	// Token is sent as "Authorization: Bearer <token>". Empty sends none.
	// Not used when TokenFunc is set.
	Token string
	// TokenFunc, if set, is asked for the token instead, for short-lived
	// tokens (a user's JWT that your backend signs). A JWT with an exp is
	// kept until TokenRefreshAhead before its exp and then asked for
	// again; any other token is asked for at each request. When the server
	// answers 401 token_expired, the function is asked at once and the
	// request is sent once more; a subscription the server ends for its
	// token's exp resumes with a new token from where it was. ctx is the
	// request's. An error, unless the token held is still before its exp
	// (then it is sent, and the function asked again halfway to the exp),
	// fails the request with the code token_unavailable (nothing is sent); subscriptions and workers retry
	// it with their backoff. One call at a time; "" sends no token.
	TokenFunc func(ctx context.Context) (string, error)
	// TokenRefreshAhead is how long before a JWT's exp TokenFunc is asked
	// for a new one; never more than half of the token's lifetime as the
	// client saw it. Defaults to 30s.
	TokenRefreshAhead time.Duration
	// HTTPClient makes the requests. Defaults to a client with no overall
	// timeout, since subscriptions stay open for minutes; set timeouts on
	// its transport, not on the client, or streams will be cut.
	HTTPClient *http.Client
	// MinBackoff and MaxBackoff bound the delay before a retry or a
	// reconnect: exponential from MinBackoff, capped at MaxBackoff, with
	// full jitter. Default to 200ms and 5s.
	MinBackoff, MaxBackoff time.Duration
	// Logger, if set, gets a line for each retry and reconnect: warnings
	// for failures, debug lines for streams that ended normally. Defaults
	// to no logging.
	Logger *slog.Logger
}

// Default backoff bounds, used when Options leaves them zero.
const (
	DefaultMinBackoff = 200 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
)

// maxRetries is how many times a REST call is retried after its first
// try (besides the one try again with a fresh token after token_expired).
const maxRetries = 4

// Client is a client of a Tether server. It is safe for concurrent use.
type Client struct {
	base   string
	tokens *tokenKeeper
	hc     *http.Client
	min    time.Duration
	max    time.Duration
	logger *slog.Logger
}

// New returns a client of the server at baseURL (like
// "http://127.0.0.1:8080"; a path prefix is kept). A nil opts gives the
// defaults.
func New(baseURL string, opts *Options) *Client {
	var o Options
	if opts != nil {
		o = *opts
	}
	c := &Client{
		base:   strings.TrimRight(baseURL, "/"),
		tokens: newTokenKeeper(&o),
		hc:     o.HTTPClient,
		min:    o.MinBackoff,
		max:    o.MaxBackoff,
		logger: o.Logger,
	}
	if c.hc == nil {
		c.hc = &http.Client{}
	}
	if c.min <= 0 {
		c.min = DefaultMinBackoff
	}
	if c.max <= 0 {
		c.max = DefaultMaxBackoff
	}
	c.max = max(c.max, c.min)
	return c
}

// backoff returns the delay before retry number attempt (from 0):
// uniform in [0, min(max, min·2^attempt)), the "full jitter" of the AWS
// architecture blog, so that many clients cut off at once do not come back
// at once.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.max
	if attempt < 32 {
		if e := c.min << attempt; e > 0 && e < c.max {
			d = e
		}
	}
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Client) log(level slog.Level, msg string, args ...any) {
	if c.logger != nil {
		c.logger.Log(context.Background(), level, msg, args...)
	}
}

// call is one REST request.
type call struct {
	op     string // for error messages: "create run"
	method string
	path   string // escaped
	query  url.Values
	body   any
	header http.Header
	// valid, if set, says whether the decoded answer is the resource asked
	// for (it has its id): JSON of another shape, such as another
	// service's {"status":"ok"}, decodes without error into a zero value.
	valid func() bool
	// goneIsDone makes a not_found answer to a retry a success when an
	// earlier try may have acted: a delete whose answer was lost (a 503,
	// a dropped connection) but that was done finds nothing the second
	// time.
	goneIsDone bool
}

// do runs a REST call, with retries, and decodes a 2xx body into out
// (unless out is nil). A non-2xx answer is returned as a *tether.Error, and
// so is a 2xx whose body cannot be decoded as out (code protocol); a 2xx
// whose body is cut short is a transport error.
//
// Every call is made safe to repeat (an id or an Idempotency-Key chosen
// here, or a request the server knows again), so transport errors, 5xx
// and 429 are retried: a failure may hide a write that landed (a 503 of
// a write that timed out, a dropped connection), and guessing which
// failures did not act lost nothing only as long as the guess held.
func (c *Client) do(ctx context.Context, cl call, out any) error {
	var body []byte
	if cl.body != nil {
		var err error
		if body, err = json.Marshal(cl.body); err != nil {
			return fmt.Errorf("%s: encode request: %w", cl.op, err)
		}
	}
	u := c.base + cl.path
	if len(cl.query) > 0 {
		u += "?" + cl.query.Encode()
	}
	acted := false // an earlier try may have been done by the server
	for attempt := 0; ; attempt++ {
		retry, wait, err := c.try(ctx, cl, u, body, out)
		if err != nil && acted && cl.goneIsDone && tether.CodeOf(err) == tether.CodeNotFound {
			return nil
		}
		if err == nil || !retry || attempt == maxRetries || ctx.Err() != nil {
			return err
		}
		acted = acted || mayHaveActed(err)
		d := max(c.backoff(attempt), min(wait, c.max))
		c.log(slog.LevelWarn, "tether: retrying", "op", cl.op, "err", err, "delay", d)
		if err := sleep(ctx, d); err != nil {
			return fmt.Errorf("%s: %w", cl.op, err)
		}
	}
}

// try makes one attempt. It returns whether the error may be retried, and
// how long the server asked to wait (Retry-After).
func (c *Client) try(ctx context.Context, cl call, u string, body []byte, out any) (retry bool, wait time.Duration, err error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, u, rd)
	if err != nil {
		return false, 0, fmt.Errorf("%s: %w", cl.op, err)
	}
	for k, v := range cl.header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, _, err := c.send(req)
	if err != nil {
		if tether.CodeOf(err) == CodeTokenUnavailable {
			return false, 0, fmt.Errorf("%s: %w", cl.op, err)
		}
		return true, 0, fmt.Errorf("%s: %w", cl.op, err)
	}
	defer drain(resp.Body)
	if resp.StatusCode/100 != 2 {
		s := resp.StatusCode
		retry := s == http.StatusTooManyRequests || s >= 500
		return retry, retryAfter(resp), responseError(resp)
	}
	if out == nil {
		return false, 0, nil
	}
	// The body is read whole before it is decoded, so that a connection
	// dropped mid-answer is told apart from an answer that is not the
	// JSON expected: the first is a transport failure, retried as one
	// (the server acted, so only a call safe to repeat is); the second
	// would be the same again.
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return true, 0, fmt.Errorf("%s: read the answer: %w", cl.op, err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return false, 0, badAnswer(cl.op, resp, err)
	}
	if cl.valid != nil && !cl.valid() {
		return false, 0, badAnswer(cl.op, resp, errors.New("the answer is JSON without the resource's id"))
	}
	return false, 0, nil
}

// send makes a request with the client's token and returns the answer
// and the token it went with. A 401 token_expired for a token of
// Options.TokenFunc is sent once more, at once, with a fresh token: the
// server checks the token before it acts, so a request it refused so can
// be repeated whatever it is (a POST without an idempotency key too). A
// static token is never sent twice. The error is the token function's
// (code token_unavailable: nothing was sent), ctx's, or the transport's.
func (c *Client) send(req *http.Request) (*http.Response, string, error) {
	for again := false; ; again = true {
		tok, err := c.tokens.get(req.Context())
		if err != nil {
			return nil, "", err
		}
		r := req
		if again {
			r = req.Clone(req.Context())
			if req.GetBody != nil {
				if r.Body, err = req.GetBody(); err != nil {
					return nil, "", err
				}
			}
		}
		if tok != "" {
			r.Header.Set("Authorization", "Bearer "+tok)
		} else {
			r.Header.Del("Authorization")
		}
		resp, err := c.hc.Do(r)
		if err != nil || again || resp.StatusCode != http.StatusUnauthorized || !c.tokens.refreshable() {
			return resp, tok, err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if errorCode(body) != tether.CodeTokenExpired {
			return resp, tok, nil
		}
		c.tokens.expired(tok)
		c.log(slog.LevelDebug, "tether: the token expired; sending again with a fresh one", "path", req.URL.Path)
	}
}

// mayHaveActed reports whether the server may have done a request that
// failed: anything but a request never sent and a 429 (answered before
// anything is done, protocol §9).
func mayHaveActed(err error) bool {
	return !notSent(err) && tether.CodeOf(err) != tether.CodeRateLimited
}

// notSent reports whether a request failed before it could reach the
// server: the connection was never made, or there was no token to send.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" || tether.CodeOf(err) == CodeTokenUnavailable
}

func retryAfter(resp *http.Response) time.Duration {
	if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 0
}

// drain reads a little of what is left of a body, so that the connection
// can be reused, and closes it.
func drain(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	_ = body.Close()
}

// escape escapes one path segment.
func escape(s string) string { return url.PathEscape(s) }
