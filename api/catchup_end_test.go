package api_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/streams"
)

// An AG-UI or AI SDK stream catching up from the store ends at shutdown,
// or at its token's exp, rather than after the rest of the log, as a
// Tether SSE stream does (TestShutdownEndsStreamInCatchUp,
// TestSSEEndsAtTokenExpiryInCatchUp): their loops looked for either only
// once caught up, so a stream far behind, or read slowly, held the
// server's shutdown, or read the thread past its token's end, for as long
// as its catch-up took. Each ends as its clients expect: the AG-UI stream
// is reset, the AI SDK's is aborted (useChat's default transport takes a
// clean end for the answer's end: at shutdown, the clean end it had left
// every open page with a cut answer shown as whole).
func TestForeignStreamsEndInCatchUp(t *testing.T) {
	for _, c := range []struct {
		name string
		// path of the stream; {rid} is the run, {after} the offset of
		// the run's message.started.
		path string
		// clean: the stream ends cleanly (else it is reset or aborted).
		clean func(shutdown bool) bool
	}{
		{"ag-ui", "/v1/ag-ui/threads/tA/events?after=-1", func(bool) bool { return false }},
		{"ai-sdk", "/v1/ai-sdk/ext/chat/tA/stream?run_id={rid}&after={after}", func(bool) bool { return false }},
	} {
		for _, shutdown := range []bool{true, false} {
			name := c.name + "/expiry"
			if shutdown {
				name = c.name + "/shutdown"
			}
			t.Run(name, func(t *testing.T) {
				f := newCatchUpFixture(t)
				v, st, alice := f.v, f.st, f.alice
				var log struct {
					Events []struct{ Type, Offset string }
				}
				v.mustDo(200, "GET", "/v1/threads/tA/events?after=-1", nil, append(alice, "Accept", "application/json")...).json(&log)
				after := ""
				for _, e := range log.Events {
					if e.Type == "message.started" {
						after = e.Offset
					}
				}
				if after == "" {
					t.Fatalf("no message.started in %+v", log)
				}

				// The stream's third read of the log is held: the AI SDK's
				// resume reads the run up to its cursor first.
				st.hold = 3
				if c.name == "ai-sdk" {
					st.hold = 5
				}
				st.armed.Store(true)
				path := strings.NewReplacer("{rid}", f.run, "{after}", after).Replace(c.path)
				body, err := f.endHeld(t, v.sse("GET", path, nil, alice...), shutdown)
				if clean := c.clean(shutdown); clean != (err == nil) {
					t.Errorf("the stream ended with %v, want a clean end %v", err, clean)
				}
				if n := st.reads.Load(); n > st.hold {
					t.Fatalf("%d reads of the log, %d after the stream had to end: the catch-up went on", n, n-st.hold)
				}
				if n := strings.Count(string(body), `"delta":"x"`); n >= 190 {
					t.Fatalf("%d deltas sent after the stream had to end", n)
				}
			})
		}
	}
}

// A stream that always has records ready still ends at
// --max-stream-lifetime: the loops of the Tether and AG-UI streams looked
// at the lifetime only on a beat, which a stream never waits for while
// the next records are ready, so a stream following a thread appended to
// without pause, or catching up from far behind, was never ended and
// rebalanced. A catch-up is the stream with records always ready that a
// test can make without timing: 200 events in the store, read 8 at a
// time, and a lifetime (1ns) already over at the first page, which the
// stream sends before it ends (so a stream always makes progress).
func TestBusyStreamEndsAtMaxLifetime(t *testing.T) {
	for _, c := range []struct{ name, path string }{
		{"sse", "/v1/threads/t1/events?after=-1"},
		{"ag-ui", "/v1/ag-ui/threads/t1/events?after=-1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := newEnvEngine(t, api.Options{MaxStreamLifetime: time.Nanosecond}, catchUpEngine())
			v.longThread("t1", 200)

			s := v.sse("GET", c.path, nil)
			body, err := io.ReadAll(s.res.Body)
			if n := strings.Count(string(body), `"delta":"x"`); n >= 190 {
				t.Fatalf("%d deltas sent past the stream's lifetime", n)
			}
			if c.name == "ag-ui" {
				if err == nil {
					t.Fatal("the AG-UI stream ended cleanly, want a reset")
				}
				return
			}
			if !strings.HasSuffix(string(body), "event: reconnect\ndata: {\"reason\":\"max_lifetime\"}\n\n") {
				t.Fatalf("the stream ended with %q, want reconnect max_lifetime", body[max(len(body)-100, 0):])
			}
		})
	}
}

// catchUpFixture is a server whose store can hold a read of the log (st),
// with a clock for tokens (clk), and thread tA of alice, whose token
// expires in a minute, with run (of agent ext, claimed) of a
// message.started and 200 deltas: more than the hub keeps (16), so that a
// stream from the start catches up from the store, 8 events a read (a
// Durable Streams read of the thread's log, about 512 bytes a read).
type catchUpFixture struct {
	v     *env
	st    *heldReadStore
	clk   *clock
	alice []string
	run   string
}

// endHeld waits for the stream s to be held in its read of the log, ends
// it there (shutdown, or its token's exp passed) and lets the read go on;
// it returns what the stream sent and how it ended.
func (f *catchUpFixture) endHeld(t *testing.T, s *sseStream, shutdown bool) ([]byte, error) {
	t.Helper()
	<-f.st.held
	shut := make(chan struct{})
	if shutdown {
		go func() { f.v.srv.Shutdown(); close(shut) }()
		testutil.Eventually(t, 5*time.Second, "shutdown started", func() bool {
			return f.v.do("GET", "/readyz", nil).status == 503
		})
	} else {
		close(shut)
		f.clk.advance(2 * time.Minute)
	}
	close(f.st.release)
	body, err := io.ReadAll(s.res.Body)
	<-shut
	return body, err
}

func newCatchUpFixture(t *testing.T) *catchUpFixture {
	t.Helper()
	f := &catchUpFixture{clk: &clock{}}
	f.st = &heldReadStore{Store: testutil.OpenStore(t, ""), held: make(chan struct{}, 1), release: make(chan struct{})}
	eopts := catchUpEngine()
	eopts.AcceptAgent = func(n string) bool { return n == "ext" }
	f.v = newEnvStreams(t, f.st, api.Options{Tokens: api.TokenOptions{Secret: tkSecret, Audience: tkAudience, Now: f.clk.now}}, eopts,
		&streams.Options{ReadBytes: 512})
	claims := userClaims(f.clk, "alice", nil)
	claims["exp"] = f.clk.now().Add(time.Minute).Unix()
	f.alice = bearer(mint(t, nil, claims))
	worker := bearer(mint(t, nil, userClaims(f.clk, "wx", map[string]any{"role": "worker", "agents": []string{"ext"}})))
	f.v.mustDo(201, "POST", "/v1/threads", `{"id":"tA"}`, f.alice...)
	f.v.mustDo(201, "POST", "/v1/threads/tA/runs", `{"agent":"ext","input":{"messages":[{"role":"user","content":"hi"}]}}`, f.alice...)
	var cl extClaim
	f.v.mustDo(200, "POST", "/v1/workers/claim", `{"worker_id":"w1","agents":["ext"],"wait_ms":1000}`, worker...).json(&cl)
	f.run = cl.Run.ID
	lease := append([]string{"Tether-Lease", cl.Lease.Token}, worker...)
	delta := `{"type":"text.delta","message_id":"a1","delta":"x"},`
	f.v.mustDo(200, "POST", "/v1/runs/"+f.run+"/events", `[{"type":"message.started","message_id":"a1","role":"assistant"},`+strings.Repeat(delta, 199)+strings.TrimSuffix(delta, ",")+"]", lease...)
	return f
}

// A Durable Streams SSE read of a thread's log that catches up from the
// store ends at shutdown (the response ends: the protocol's clients
// reconnect from their last offset) or at its token's exp (reconnect
// token_expired, then the end), not after the rest of the log: its
// catch-up looked for neither, and once live looked for them only while
// it waited, so a read far behind, or read slowly, held the server's
// shutdown or read the thread past its token's end.
func TestDurableStreamsSSEEndsInCatchUp(t *testing.T) {
	for _, shutdown := range []bool{true, false} {
		name := "expiry"
		if shutdown {
			name = "shutdown"
		}
		t.Run(name, func(t *testing.T) {
			f := newCatchUpFixture(t)
			v, st, alice := f.v, f.st, f.alice
			// The read's first Read reads the log once, each later one
			// twice (where its offset is, then a page): the third read of
			// the log is the second Read's page.
			st.hold = 3
			st.armed.Store(true)
			body, err := f.endHeld(t, v.sse("GET", "/v1/stream/threads/tA?offset=-1&live=sse", nil, alice...), shutdown)
			if err != nil {
				t.Fatalf("the response ended with %v, want its end", err)
			}
			if n := st.reads.Load(); n > st.hold {
				t.Fatalf("%d reads of the log, %d after the response had to end: the catch-up went on", n, n-st.hold)
			}
			if n := strings.Count(string(body), `"delta":"x"`); n >= 190 {
				t.Fatalf("%d deltas sent after the response had to end", n)
			}
			reconnect := strings.HasSuffix(string(body), "event: reconnect\ndata: {\"reason\":\"token_expired\"}\n\n")
			if reconnect == shutdown {
				t.Fatalf("the response ended with %q; want reconnect token_expired %v", body[max(len(body)-100, 0):], !shutdown)
			}
		})
	}
}
