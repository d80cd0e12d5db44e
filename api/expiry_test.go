package api_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// newExpiryEnv is a token env whose streams beat often, with user A's
// thread tA (a run of agent ext waiting for a worker, so that streams stay
// open) and a token of user A that expires in a minute by clock c.
func newExpiryEnv(t *testing.T, c *clock) (*env, string) {
	t.Helper()
	// Long polls would wait a minute but for the token's exp.
	v := newTokenEnv(t, c, api.Options{Heartbeat: 40 * time.Millisecond, LongPollTimeout: time.Minute})
	claims := userClaims(c, "alice", nil)
	claims["exp"] = c.now().Add(time.Minute).Unix()
	tok := mint(t, nil, claims)
	v.mustDo(201, "POST", "/v1/threads", `{"id":"tA"}`, bearer(tok)...)
	v.mustDo(201, "POST", "/v1/threads/tA/runs", `{"agent":"ext","input":{"messages":[{"role":"user","content":"hi"}]}}`, bearer(tok)...)
	return v, tok
}

// A stream ends at its token's exp with reconnect token_expired, on every
// SSE surface; before, it went on for as long as the connection lasted.
// The clock jumps past exp once the stream is live: the stream ends at
// its next beat.
func TestSSEEndsAtTokenExpiry(t *testing.T) {
	for _, c := range []struct {
		name, path string
		// last is the stream's last frame: its event name, or "" for
		// the AG-UI stream (reset as for any cut) and the AI SDK's
		// (ended), which have no reconnect event.
		last string
	}{
		{"thread events", "/v1/threads/tA/events", "reconnect"},
		{"run events", "/v1/runs/{rid}/events", "reconnect"},
		{"ag-ui thread", "/v1/ag-ui/threads/tA/events", ""},
		// The AI SDK's stream ends as at shutdown: useChat resumes it.
		{"ai-sdk stream", "/v1/ai-sdk/ext/chat/tA/stream", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var clk clock
			v, tok := newExpiryEnv(t, &clk)
			var th struct {
				Thread struct {
					ActiveRunID string `json:"active_run_id"`
				}
			}
			v.mustDo(200, "GET", "/v1/threads/tA", nil, bearer(tok)...).json(&th)
			s := v.sse("GET", strings.Replace(c.path, "{rid}", th.Thread.ActiveRunID, 1), nil, bearer(tok)...)
			if _, err := s.next(); err != nil { // the stream is up
				t.Fatal(err)
			}
			clk.advance(time.Minute)
			var last frame
			for {
				f, err := s.next()
				if err != nil {
					break
				}
				if !f.comment && f.event != "ping" {
					last = f
				}
			}
			if c.last == "" {
				if last.event == "reconnect" {
					t.Fatalf("stream ended with %+v, which its clients do not know", last)
				}
				return
			}
			if last.event != c.last || last.data != `{"reason":"token_expired"}` {
				t.Fatalf("last frame %+v, want reconnect token_expired", last)
			}
		})
	}
}

// A WebSocket whose token expires ends every subscription with
// token_expired and its offset, then closes with 4001 token_expired.
func TestWebSocketEndsAtTokenExpiry(t *testing.T) {
	var clk clock
	v, tok := newExpiryEnv(t, &clk)
	w := v.ws("", bearer(tok)...)
	w.subscribe("a", "thread_id", "tA", "after", "now")
	w.expect("subscribed", "a")
	w.subscribe("b", "thread_id", "tA")
	w.expect("subscribed", "b")
	clk.advance(time.Minute)
	ended := map[string]bool{}
	for len(ended) < 2 {
		m, err := w.next()
		if err != nil {
			t.Fatalf("socket ended before both subscriptions did (%v): %v", ended, err)
		}
		if m.Op != "end" {
			continue
		}
		if m.Reason != "token_expired" || m.Offset == "" {
			t.Fatalf("end frame %s, want token_expired with an offset", m.raw)
		}
		ended[m.ID] = true
	}
	_, err := w.next()
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 4001 || ce.Reason != "token_expired" {
		t.Fatalf("after the ends: %v, want close 4001 token_expired", err)
	}
}

// A JSON long poll never waits past the token's exp: with a second left
// before exp, a wait of an hour answers (with nothing) at exp. It runs on
// the clock of a synctest bubble, which reads when the wait ended exactly.
func TestLongPollBoundedByExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, tok, exp := newBubbleExpiry(t)
		time.Sleep(time.Until(exp) - time.Second)
		r := serveOnce(h, "GET", "/v1/threads/tA/events?after=now&wait=3600000", "", append(bearer(tok), "Accept", "application/json")...)
		if r.status != http.StatusOK || time.Now().After(exp) {
			t.Fatalf("the long poll answered %d %s %v after the token's exp", r.status, r.body, time.Since(exp))
		}
	})
}

// An expired token gets 401 token_expired (so that a client refreshes it
// rather than ask its user), with WWW-Authenticate; within the leeway it
// is still accepted for requests.
func TestTokenExpired(t *testing.T) {
	var clk clock
	v, tok := newExpiryEnv(t, &clk)
	clk.advance(time.Minute + 20*time.Second) // within the 30s leeway
	v.mustDo(200, "GET", "/v1/threads/tA", nil, bearer(tok)...)
	clk.advance(20 * time.Second)
	r := v.do("GET", "/v1/threads/tA", nil, bearer(tok)...)
	if r.status != http.StatusUnauthorized || r.code() != "token_expired" || r.header.Get("WWW-Authenticate") == "" {
		t.Fatalf("expired token: %d %s %v", r.status, r.body, r.header)
	}
	if _, res, err := v.dialWS("?access_token="+tok, nil); err == nil || res == nil || res.StatusCode != 401 {
		t.Fatalf("WebSocket with an expired token: %v %v", res, err)
	}
}

// A Durable Streams SSE read ends at its token's exp with reconnect
// token_expired; the clock is set just short of exp, since the stream
// waits on timers.
func TestDurableStreamsEndAtTokenExpiry(t *testing.T) {
	var clk clock
	v, tok := newExpiryEnv(t, &clk)
	exp := clk.now().Add(time.Minute).Truncate(time.Second)
	clk.advance(exp.Sub(clk.now()) - 50*time.Millisecond)
	s := v.sse("GET", "/v1/stream/threads/tA?offset=-1&live=sse", nil, bearer(tok)...)
	var last frame
	for {
		f, err := s.next()
		if err != nil {
			break
		}
		last = f
	}
	if last.event != "reconnect" || last.data != `{"reason":"token_expired"}` {
		t.Fatalf("last frame %+v, want reconnect token_expired", last)
	}
}

// A Durable Streams long poll answers (204) at its token's exp, not after
// its wait of an hour; on the clock of a synctest bubble.
func TestDurableStreamsLongPollEndsAtTokenExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, tok, exp := newBubbleExpiry(t)
		time.Sleep(time.Until(exp) - 50*time.Millisecond)
		r := serveOnce(h, "HEAD", "/v1/stream/threads/tA", "", bearer(tok)...)
		next := r.header.Get("Stream-Next-Offset")
		r = serveOnce(h, "GET", "/v1/stream/threads/tA?offset="+next+"&live=long-poll", "", bearer(tok)...)
		if r.status != http.StatusNoContent || time.Now().After(exp) {
			t.Fatalf("long poll at exp: %d %s %v after exp", r.status, r.body, time.Since(exp))
		}
	})
}

// newBubbleExpiry is newExpiryEnv for a test in a synctest bubble
// (newBubbleServer): its waits last an hour but for a token's exp, with
// user A's thread tA and a token of user A that expires in a minute.
func newBubbleExpiry(t *testing.T) (h http.Handler, tok string, exp time.Time) {
	t.Helper()
	h = newBubbleServer(t, testutil.OpenStore(t, ""), api.Options{LongPollTimeout: time.Hour, MaxWait: time.Hour,
		Tokens: api.TokenOptions{Secret: tkSecret, Audience: tkAudience}}, engine.Options{})
	exp = time.Now().Add(time.Minute)
	tok = mint(t, nil, jwt.MapClaims{"sub": "alice", "aud": tkAudience, "exp": exp.Unix(), "iat": time.Now().Unix()})
	if r := serveOnce(h, "POST", "/v1/threads", `{"id":"tA"}`, append(bearer(tok), "Content-Type", "application/json")...); r.status != http.StatusCreated {
		t.Fatalf("create thread: %d %s", r.status, r.body)
	}
	return h, tok, exp
}

// A stream that catches up from the store when its token's exp passes
// ends there with reconnect token_expired, not after the rest of the log:
// the catch-up looked at exp only once caught up, so a stream far behind,
// or read slowly, kept reading the thread past its token's end.
func TestSSEEndsAtTokenExpiryInCatchUp(t *testing.T) {
	f := newCatchUpFixture(t)
	v, st, clk, alice := f.v, f.st, f.clk, f.alice
	st.hold = 3
	st.armed.Store(true)
	s := v.sse("GET", "/v1/threads/tA/events?after=-1", nil, alice...)
	<-st.held // two pages read, the third held
	clk.advance(2 * time.Minute)
	close(st.release)
	fs := s.all()
	if last := fs[len(fs)-1]; last.event != "reconnect" || last.data != `{"reason":"token_expired"}` {
		t.Fatalf("last frame %+v, want reconnect token_expired", last)
	}
	if n := st.reads.Load(); n > st.hold {
		t.Fatalf("%d reads of the log, %d after the token expired: the catch-up went on", n, n-st.hold)
	}
}
