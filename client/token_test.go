package client

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/golang-jwt/jwt/v5"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// tokenAdminKey is the static admin key of a token env.
const tokenAdminKey = "admin-key-of-the-token-tests"

// tokenEnv is a real server that takes signed tokens (HS256 with
// testutil.JWTSecret) by clock, a test clock: the test decides when a
// token has expired for the server, which ends streams at the exp of
// their token on its beat (every 10 ms here). The worker's and the
// admin's clients of workerEnv use tokenAdminKey.
type tokenEnv struct {
	*workerEnv
	clock *testutil.Clock
}

func newTokenEnv(t *testing.T) *tokenEnv {
	t.Helper()
	clk := testutil.NewClock()
	v := newWorkerEnvAPI(t, engine.Options{}, api.Options{
		Keys:      []api.Key{{Token: tokenAdminKey, Role: api.RoleAdmin}},
		Tokens:    api.TokenOptions{Secret: testutil.JWTSecret, Now: clk.Now},
		Heartbeat: 40 * time.Millisecond,
	}, tokenAdminKey)
	return &tokenEnv{workerEnv: v, clock: clk}
}

// expire moves the server's clock past the exp of every token minted so
// far (they last an hour), and past its leeway.
func (v *tokenEnv) expire() { v.clock.Advance(2 * time.Hour) }

// mint signs a token of sub valid for life by the server's clock, with
// Tether's claim tc if not nil.
func (v *tokenEnv) mint(sub string, life time.Duration, tc map[string]any) string {
	v.t.Helper()
	now := v.clock.Now()
	claims := jwt.MapClaims{"sub": sub, "iat": now.Unix(), "exp": now.Add(life).Unix()}
	if tc != nil {
		claims["tether"] = tc
	}
	return testutil.Mint(v.t, nil, claims)
}

// tokenSource is a TokenFunc that mints a new token of one user at each
// call, valid for an hour by the server's clock.
type tokenSource struct {
	v      *tokenEnv
	sub    string
	tc     map[string]any
	life   time.Duration // defaults to an hour
	mu     sync.Mutex
	tokens []string      // what each call returned
	second chan struct{} // closed by the second call
}

func (v *tokenEnv) source(sub string, tc map[string]any) *tokenSource {
	return &tokenSource{v: v, sub: sub, tc: tc, life: time.Hour, second: make(chan struct{})}
}

func (s *tokenSource) token(ctx context.Context) (string, error) {
	tok := s.v.mint(s.sub, s.life, s.tc)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = append(s.tokens, tok)
	if len(s.tokens) == 2 {
		close(s.second)
	}
	return tok, nil
}

func (s *tokenSource) given() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.tokens...)
}

// sent is one request as a recording transport saw it.
type sent struct {
	method, path, token, lastID string
	status                      int // 0: no answer
}

// recording is a RoundTripper that keeps what each request carried and
// how it was answered.
type recording struct {
	base *http.Transport
	mu   sync.Mutex
	reqs []sent
}

func newRecording(t *testing.T) *recording {
	r := &recording{base: &http.Transport{}}
	t.Cleanup(r.base.CloseIdleConnections)
	return r
}

func (r *recording) RoundTrip(req *http.Request) (*http.Response, error) {
	s := sent{
		method: req.Method, path: req.URL.Path, lastID: req.Header.Get("Last-Event-ID"),
		token: strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer "),
	}
	resp, err := r.base.RoundTrip(req)
	if err == nil {
		s.status = resp.StatusCode
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, s)
	r.mu.Unlock()
	return resp, err
}

// to returns the requests whose method and path match (path by suffix).
func (r *recording) to(method, pathSuffix string) []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []sent
	for _, s := range r.reqs {
		if s.method == method && strings.HasSuffix(s.path, pathSuffix) {
			out = append(out, s)
		}
	}
	return out
}

// client returns a client of the env through rec with opts.
func (v *tokenEnv) client(rec *recording, opts Options) *Client {
	opts.HTTPClient = &http.Client{Transport: rec}
	opts.MinBackoff, opts.MaxBackoff = 5*time.Millisecond, 50*time.Millisecond
	return New(v.url, &opts)
}

// gated streams one assistant message, one text.delta per word, and
// waits for gate before word number at.
func gated(words []string, at int, gate <-chan struct{}) agents.Func {
	return func(ctx context.Context, s *agents.Session) error {
		msg, err := s.StartMessage(ctx, tether.RoleAssistant)
		if err != nil {
			return err
		}
		for i, w := range words {
			if i == at {
				select {
				case <-gate:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if err := s.Text(ctx, msg, w); err != nil {
				return err
			}
		}
		return s.FinishMessage(ctx, msg, tether.MessageDone)
	}
}

// startRun creates a thread and a run of agent as c's user.
func startRun(t *testing.T, c *Client, agent string) tether.Run {
	t.Helper()
	ctx := testCtx(t)
	th, err := c.CreateThread(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.CreateRun(ctx, th.ID, RunRequest{
		Agent: agent,
		Input: tether.RunInput{Messages: []tether.InputMessage{{Role: tether.RoleUser, Content: "hi"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// checkOrder checks that the events' offsets only go up.
func checkOrder(t *testing.T, evs []*tether.Event) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		if !evs[i].Offset.After(evs[i-1].Offset) {
			t.Fatalf("event %d at %s after %s", i, evs[i].Offset, evs[i-1].Offset)
		}
	}
}

// A run followed with a token function whose token expires mid-stream:
// the server ends the stream (reconnect, token_expired), the client asks
// for a new token and resumes from its last event with it. The rest of
// the run is streamed only once the new token was asked for, so it
// comes through the resumed stream; every event arrives once, in order.
func TestTokenFuncFollowResumes(t *testing.T) {
	v := newTokenEnv(t)
	words := wordList(10)
	gate := make(chan struct{})
	v.start(WorkerOptions{Agents: map[string]agents.Agent{"gated": gated(words, 5, gate)}})
	src := v.source("alice", nil)
	rec := newRecording(t)
	c := v.client(rec, Options{TokenFunc: src.token})
	run := startRun(t, c, "gated")

	var evs []*tether.Event
	for u, err := range c.Subscribe(testCtx(t), SubscribeRequest{RunID: run.ID, After: tether.OffsetStart}) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, u.Event)
		if u.Event.Type == tether.EventTextDelta && count(evs, tether.EventTextDelta) == 5 {
			v.expire()
			go func() { <-src.second; close(gate) }()
		}
	}
	checkOnce(t, evs, words)
	checkOrder(t, evs)
	toks := src.given()
	if len(toks) != 2 {
		t.Fatalf("the token function was called %d times, want 2", len(toks))
	}
	follows := rec.to("GET", "/v1/runs/"+run.ID+"/events")
	if len(follows) < 2 || follows[0].token != toks[0] {
		t.Fatalf("follows %+v", follows)
	}
	// The reconnect went with the new token at once: no 401 on the way.
	for i, f := range follows[1:] {
		if f.token != toks[1] || f.status != http.StatusOK || f.lastID == "" {
			t.Errorf("follow %d: %+v, want the new token, 200, and Last-Event-ID", i+1, f)
		}
	}
}

// A request answered 401 token_expired (the server's clock is past the
// token's exp, which the client's is not) is sent once more with a new
// token from the function: a POST without an idempotency key too, since
// the server refused it before acting, and a subscription's connection.
// A function that gives expired tokens gets one more try, not a loop.
func TestTokenFuncRetriesExpired(t *testing.T) {
	v := newTokenEnv(t)
	ctx := testCtx(t)
	src := v.source("alice", nil)
	rec := newRecording(t)
	c := v.client(rec, Options{TokenFunc: src.token})
	first, err := c.CreateThread(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	v.expire()
	second, err := c.CreateThread(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	toks := src.given()
	creates := rec.to("POST", "/v1/threads")
	want := []sent{
		{"POST", "/v1/threads", toks[0], "", 201},
		{"POST", "/v1/threads", toks[0], "", 401},
		{"POST", "/v1/threads", toks[1], "", 201},
	}
	if len(toks) != 2 || !slices.Equal(creates, want) {
		t.Fatalf("tokens %d, creates %+v, want %+v", len(toks), creates, want)
	}
	threads, _, err := c.Threads(ctx, ThreadQuery{})
	if err != nil || len(threads) != 2 {
		t.Fatalf("alice has %d threads (%v), want %s and %s", len(threads), err, first.ID, second.ID)
	}

	v.expire()
	for u, err := range c.Subscribe(ctx, SubscribeRequest{ThreadID: second.ID}) {
		if err != nil {
			t.Fatal(err)
		}
		if u.Snapshot == nil || u.Snapshot.Thread.ID != second.ID {
			t.Fatalf("first update %+v, want the thread's snapshot", u)
		}
		break
	}
	follows := rec.to("GET", "/v1/threads/"+second.ID+"/events")
	if toks = src.given(); len(toks) != 3 || len(follows) != 2 ||
		follows[0].token != toks[1] || follows[0].status != 401 || follows[1].token != toks[2] || follows[1].status != 200 {
		t.Fatalf("tokens %d, follows %+v", len(toks), follows)
	}

	t.Run("once", func(t *testing.T) {
		stale := v.source("alice", nil)
		stale.life = -time.Hour
		rec := newRecording(t)
		c := v.client(rec, Options{TokenFunc: stale.token})
		_, err := c.Thread(ctx, first.ID)
		if !errors.Is(err, tether.ErrTokenExpired) {
			t.Fatalf("err %v, want token_expired", err)
		}
		if n, reqs := len(stale.given()), rec.to("GET", "/v1/threads/"+first.ID); n != 2 || len(reqs) != 2 {
			t.Fatalf("%d tokens, %d requests, want 2 and 2", n, len(reqs))
		}
	})
}

// A static Token is sent as it is, whatever the server says of it: a
// stream ended for its exp reconnects with it and yields the 401
// token_expired that answers, and a REST call answered so fails with it,
// sent once.
func TestStaticTokenExpires(t *testing.T) {
	v := newTokenEnv(t)
	words := wordList(10)
	gate := make(chan struct{})
	defer close(gate)
	v.start(WorkerOptions{Agents: map[string]agents.Agent{"gated": gated(words, 5, gate)}})
	tok := v.mint("alice", time.Hour, nil)
	rec := newRecording(t)
	c := v.client(rec, Options{Token: tok})
	run := startRun(t, c, "gated")

	var evs []*tether.Event
	var last error
	for u, err := range c.Subscribe(testCtx(t), SubscribeRequest{RunID: run.ID, After: tether.OffsetStart}) {
		if err != nil {
			last = err
			continue
		}
		evs = append(evs, u.Event)
		if u.Event.Type == tether.EventTextDelta && count(evs, tether.EventTextDelta) == 5 {
			v.expire()
		}
	}
	if !errors.Is(last, tether.ErrTokenExpired) || count(evs, tether.EventTextDelta) != 5 {
		t.Fatalf("the subscription ended with %v after %d deltas, want token_expired after 5", last, count(evs, tether.EventTextDelta))
	}
	checkOrder(t, evs)
	if _, err := c.Run(testCtx(t), run.ID); !errors.Is(err, tether.ErrTokenExpired) {
		t.Fatalf("get run: %v, want token_expired", err)
	}
	if reqs := rec.to("GET", "/v1/runs/"+run.ID); len(reqs) != 1 {
		t.Fatalf("get run sent %d times, want once", len(reqs))
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, s := range rec.reqs {
		if s.token != tok {
			t.Fatalf("%s %s sent with another token", s.method, s.path)
		}
	}
}

// A worker whose token function gives short-lived worker tokens goes on
// past their exp: its appends, its heartbeats, its claims and its follow
// of the run get a fresh token, and the runs end done, whole.
func TestWorkerTokenFunc(t *testing.T) {
	v := newTokenEnv(t)
	words := wordList(10)
	gate := make(chan struct{})
	src := v.source("worker-1", map[string]any{"role": "worker"})
	rec := newRecording(t)
	wc := v.client(rec, Options{TokenFunc: src.token})
	v.startOn(wc, WorkerOptions{Agents: map[string]agents.Agent{"gated": gated(words, 5, gate)}})

	run := v.newRun("gated", "one")
	half := strings.Join(words[:5], "")
	testutil.Eventually(t, 30*time.Second, "the first words", func() bool {
		fa, err := v.admin.FinalAnswer(context.Background(), run.ThreadID)
		return err == nil && fa.Content == half
	})
	v.expire()
	// While the agent waits, the lease is renewed and the run followed
	// with a new token.
	renewed := func(method, path string) bool {
		for _, s := range rec.to(method, path) {
			if s.status == http.StatusOK && s.token != src.given()[0] {
				return true
			}
		}
		return false
	}
	testutil.Eventually(t, 30*time.Second, "a heartbeat and a follow with a new token", func() bool {
		return renewed("POST", "/v1/runs/"+run.ID+"/heartbeat") && renewed("GET", "/v1/runs/"+run.ID+"/events")
	})
	close(gate)
	if r := v.waitEnded(run.ID); r.Status != tether.RunDone {
		t.Fatalf("run 1 ended %s (%+v)", r.Status, r.Error)
	}
	checkOnce(t, v.events(run.ID), words)

	// The claim after the first run went with the expired token, or the
	// fresh one the appends got.
	run2 := v.newRun("gated", "two")
	if r := v.waitEnded(run2.ID); r.Status != tether.RunDone {
		t.Fatalf("run 2 ended %s (%+v)", r.Status, r.Error)
	}
	checkOnce(t, v.events(run2.ID), words)
	if n := len(src.given()); n < 2 {
		t.Fatalf("the token function was called %d times, want a new token after the exp", n)
	}
}

var errNoSession = errors.New("no session")

// A token function that fails fails the request with token_unavailable,
// wrapping its error, and sends nothing; a subscription retries it with
// its backoff. A token that is not a JWT (a static key the function
// gives) is asked for at each request.
func TestTokenFuncFails(t *testing.T) {
	v := newTokenEnv(t)
	ctx := testCtx(t)
	rec := newRecording(t)
	var calls atomic.Int32
	fail := 1
	c := v.client(rec, Options{TokenFunc: func(context.Context) (string, error) {
		if n := calls.Add(1); n <= int32(fail) {
			return "", errNoSession
		}
		return tokenAdminKey, nil
	}})
	_, err := c.CreateThread(ctx, "t1", nil)
	if tether.CodeOf(err) != CodeTokenUnavailable || !errors.Is(err, errNoSession) {
		t.Fatalf("err %v, want token_unavailable wrapping the function's", err)
	}
	if reqs := rec.to("POST", "/v1/threads"); len(reqs) != 0 {
		t.Fatalf("sent %+v without a token", reqs)
	}
	if _, err := c.CreateThread(ctx, "t1", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Thread(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("the function was called %d times for 3 requests, want 3", n)
	}

	calls.Store(0)
	fail = 2
	var states []State
	for u, err := range c.Subscribe(ctx, SubscribeRequest{ThreadID: "t1", OnState: func(s State) { states = append(states, s) }}) {
		if err != nil {
			t.Fatal(err)
		}
		if u.Snapshot == nil {
			t.Fatalf("first update %+v, want the snapshot", u)
		}
		break
	}
	if n := calls.Load(); n != 3 || len(rec.to("GET", "/v1/threads/t1/events")) != 1 {
		t.Fatalf("%d calls, %d connections; want 3 calls (2 failed) and 1 connection", n, len(rec.to("GET", "/v1/threads/t1/events")))
	}
	if len(states) < 2 || states[1] != StateReconnecting {
		t.Fatalf("states %v, want reconnecting after the failed token", states)
	}
}

// A JWT is kept until TokenRefreshAhead (30 s) before its exp, by the
// client's clock, then asked for again before it is sent; a short-lived
// one until half its lifetime.
func TestTokenRefreshedBeforeExp(t *testing.T) {
	v := newTokenEnv(t)
	ctx := testCtx(t)
	src := v.source("alice", nil)
	src.life = 10 * time.Minute
	rec := newRecording(t)
	c := v.client(rec, Options{TokenFunc: src.token})
	c.tokens.now = v.clock.Now // the client's clock is the server's
	list := func(advance time.Duration) {
		t.Helper()
		v.clock.Advance(advance)
		if _, _, err := c.Threads(ctx, ThreadQuery{}); err != nil {
			t.Fatal(err)
		}
	}
	list(0)
	list(9*time.Minute + 29*time.Second) // 31 s before exp
	src.life = 40 * time.Second
	list(2 * time.Second) // 28 s before: a new one, of 40 s
	list(19 * time.Second)
	list(2 * time.Second) // 19 s before its exp: past half its life
	toks := src.given()
	var got []string
	for _, s := range rec.to("GET", "/v1/threads") {
		if s.status != http.StatusOK {
			t.Fatalf("%+v", s)
		}
		got = append(got, s.token)
	}
	if len(toks) != 3 || !slices.Equal(got, []string{toks[0], toks[0], toks[1], toks[1], toks[2]}) {
		t.Fatalf("%d tokens; sent %d requests, not with the tokens in turn", len(toks), len(got))
	}
}

// A token function that fails when asked ahead of the exp (its
// endpoint down for a moment) does not fail the request: the token held
// is still valid and is sent, and the function is asked again later
// (halfway to the exp). Before, the request failed token_unavailable.
func TestTokenFuncFailsAheadOfExp(t *testing.T) {
	v := newTokenEnv(t)
	ctx := testCtx(t)
	src := v.source("alice", nil)
	src.life = 10 * time.Minute
	var fail atomic.Bool
	fn := func(ctx context.Context) (string, error) {
		if fail.Load() {
			return "", errors.New("auth endpoint down")
		}
		return src.token(ctx)
	}
	rec := newRecording(t)
	c := v.client(rec, Options{TokenFunc: fn})
	c.tokens.now = v.clock.Now
	list := func(advance time.Duration) error {
		v.clock.Advance(advance)
		_, _, err := c.Threads(ctx, ThreadQuery{})
		return err
	}
	if err := list(0); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if err := list(9*time.Minute + 40*time.Second); err != nil { // 20 s before exp
		t.Fatalf("a failed refresh ahead of exp failed the request: %v", err)
	}
	fail.Store(false)
	if err := list(15 * time.Second); err != nil { // 5 s before exp: asked again
		t.Fatal(err)
	}
	toks := src.given()
	var got []string
	for _, s := range rec.to("GET", "/v1/threads") {
		got = append(got, s.token)
	}
	if len(toks) != 2 || !slices.Equal(got, []string{toks[0], toks[0], toks[1]}) {
		t.Fatalf("%d tokens given; the requests were not sent with the held one, then the new one", len(toks))
	}
	// Past the exp, a failing function fails the request.
	fail.Store(true)
	if err := list(time.Hour); tether.CodeOf(err) != CodeTokenUnavailable {
		t.Fatalf("past the exp: %v, want token_unavailable", err)
	}
}

// Requests that need a token while the function is being asked wait for
// its answer instead of asking again; when the request that asked gives
// up (its context ends), one of those waiting asks again.
func TestTokenOneCallAtATime(t *testing.T) {
	// keeper's function holds its first call until release or the end
	// of the caller's context.
	keeper := func(t *testing.T, release <-chan struct{}) (*tokenKeeper, *atomic.Int32) {
		var calls atomic.Int32
		return newTokenKeeper(&Options{TokenFunc: func(ctx context.Context) (string, error) {
			if calls.Add(1) == 1 {
				select {
				case <-release:
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}
			return testutil.Mint(t, nil, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}), nil
		}}), &calls
	}
	type got struct {
		tok string
		err error
	}

	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		k, calls := keeper(t, release)
		var res [4]got
		var wg sync.WaitGroup
		for i := range res {
			wg.Go(func() { res[i].tok, res[i].err = k.get(context.Background()) })
			synctest.Wait() // the first is in the function, the others wait for it
		}
		close(release)
		wg.Wait()
		for i, r := range res {
			if r.err != nil || r.tok != res[0].tok {
				t.Fatalf("get %d: %v, another token than the first's", i, r.err)
			}
		}
		if n := calls.Load(); n != 1 {
			t.Fatalf("the function was called %d times, want once", n)
		}
	})

	synctest.Test(t, func(t *testing.T) {
		k, calls := keeper(t, nil)
		ctx, cancel := context.WithCancel(context.Background())
		var first, second got
		var wg sync.WaitGroup
		wg.Go(func() { first.tok, first.err = k.get(ctx) })
		synctest.Wait()
		wg.Go(func() { second.tok, second.err = k.get(context.Background()) })
		synctest.Wait()
		cancel()
		wg.Wait()
		if !errors.Is(first.err, context.Canceled) || second.err != nil || second.tok == "" || calls.Load() != 2 {
			t.Fatalf("first %v, second %q %v, %d calls", first.err, second.tok, second.err, calls.Load())
		}
	})
}

func TestJWTExpiry(t *testing.T) {
	enc := func(payload string) string {
		return "eyJhbGciOiJIUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".sig"
	}
	for _, c := range []struct {
		tok  string
		want time.Time
		ok   bool
	}{
		{enc(`{"exp":1700000000}`), time.Unix(1700000000, 0), true},
		{enc(`{"exp":1700000000.5}`), time.Unix(1700000000, 5e8), true},
		{"eyJhbGciOiJIUzI1NiJ9." + base64.URLEncoding.EncodeToString([]byte(`{"exp":17}`)) + ".sig", time.Unix(17, 0), true},
		{enc(`{"exp":1e300}`), time.Unix(maxExp, 0), true},
		{enc(`{"exp":-1e300}`), time.Unix(0, 0), true},
		{enc(`{"exp":"1700000000"}`), time.Time{}, false},
		{enc(`{"exp":true}`), time.Time{}, false},
		{enc(`{"sub":"alice"}`), time.Time{}, false},
		{enc(`[1]`), time.Time{}, false},
		{"a-static-key-of-32-characters-or-so", time.Time{}, false},
		{"a.b", time.Time{}, false},
		{"a..c", time.Time{}, false},
		{"a.!!!.c", time.Time{}, false},
	} {
		got, ok := jwtExpiry(c.tok)
		if ok != c.ok || !got.Equal(c.want) {
			t.Errorf("jwtExpiry(%q) = %v %v, want %v %v", c.tok, got, ok, c.want, c.ok)
		}
	}
}

func FuzzJWTExpiry(f *testing.F) {
	f.Add("eyJhbGciOiJIUzI1NiJ9.eyJleHAiOjE3MDAwMDAwMDB9.sig")
	f.Add("a.b.c")
	f.Fuzz(func(t *testing.T, tok string) {
		exp, ok := jwtExpiry(tok)
		if ok && (exp.Before(time.Unix(0, 0)) || exp.After(time.Unix(maxExp+1, 0))) {
			t.Fatalf("exp %v out of range", exp)
		}
	})
}
