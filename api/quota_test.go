package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// limited checks that r is 429 with a Retry-After of whole seconds and
// the stable code.
func limited(t *testing.T, what string, r *resp, code string) {
	t.Helper()
	if r.status != 429 || r.code() != code {
		t.Fatalf("%s: %d %s, want 429 %s", what, r.status, r.body, code)
	}
	if n, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || n < 1 {
		t.Fatalf("%s: Retry-After %q, want a number of seconds", what, r.header.Get("Retry-After"))
	}
}

func mustRate(t *testing.T, s string) api.Rate {
	t.Helper()
	r, err := api.ParseRate(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// refused sends a request expected to be refused: a stream that is let in
// instead is ended after 10s, and its 200 reported, rather than read
// forever.
func (v *env) refused(method, path string, body string, hdr ...string) *resp {
	v.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(ctx, method, v.url+path, rd)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		v.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return &resp{res.StatusCode, res.Header, b}
}

// logOf reads a thread's whole log with a token.
func (v *env) logOf(tid, tok string) []json.RawMessage {
	v.t.Helper()
	var p struct {
		Events []json.RawMessage `json:"events"`
	}
	v.mustDo(200, "GET", "/v1/threads/"+tid+"/events?after=-1", nil, append(bearer(tok), "Accept", "application/json")...).json(&p)
	return p.Events
}

// Threads and streams created count against the key that creates them: a
// key over its rate gets 429 rate_limited with Retry-After, nothing is
// created, and another key is not touched. Before: every create was let in.
func TestLimitCreates(t *testing.T) {
	v := newAuthEnv(t, api.Options{Limits: api.Limits{Threads: mustRate(t, "2/h")}})
	c, a := bearer(azClient), bearer(azAdmin)
	v.mustDo(201, "POST", "/v1/threads", map[string]any{"id": "t1"}, c...)
	v.mustDo(201, "PUT", "/v1/stream/s1", `{"a":1}`, append(c, "Content-Type", "application/json")...)
	limited(t, "third thread", v.do("POST", "/v1/threads", map[string]any{"id": "t3"}, c...), "rate_limited")
	limited(t, "a stream", v.do("PUT", "/v1/stream/s2", `{"a":1}`, append(c, "Content-Type", "application/json")...), "rate_limited")
	v.mustDo(404, "GET", "/v1/threads/t3", nil, a...)
	v.mustDo(404, "HEAD", "/v1/stream/s2", nil, a...)
	// Reads do not count.
	v.mustDo(200, "GET", "/v1/threads/t1", nil, c...)
	// Another principal.
	v.mustDo(201, "POST", "/v1/threads", map[string]any{"id": "t3"}, a...)
	if m := v.mustDo(200, "GET", "/metrics", nil); !strings.Contains(string(m.body), `tether_limited_total{limit="threads"} 2`) {
		t.Fatalf("metrics do not count the refusals:\n%s", m.body)
	}
}

// Runs started count on every surface that starts one; a refused run
// leaves the thread without it.
func TestLimitRuns(t *testing.T) {
	v := newAuthEnv(t, api.Options{Limits: api.Limits{Runs: mustRate(t, "1/h")}})
	c, a := bearer(azClient), bearer(azAdmin)
	v.mustDo(201, "POST", "/v1/threads", map[string]any{"id": "t1"}, c...)
	v.mustDo(201, "POST", "/v1/threads", map[string]any{"id": "t2"}, c...)
	body := `{"agent":"ext","input":{"messages":[{"role":"user","content":"hi"}]}}`
	v.mustDo(201, "POST", "/v1/threads/t1/runs", body, c...)
	limited(t, "second run", v.do("POST", "/v1/threads/t2/runs", body, c...), "rate_limited")
	limited(t, "a run and its stream", v.do("POST", "/v1/threads/t2/runs/stream", body, c...), "rate_limited")
	limited(t, "an AG-UI run", v.do("POST", "/v1/ag-ui/ext", `{"threadId":"t2","runId":"r1","messages":[{"id":"m1","role":"user","content":"hi"}],"tools":[],"context":[],"state":{},"forwardedProps":{}}`, c...), "rate_limited")
	limited(t, "an AI SDK chat", v.do("POST", "/v1/ai-sdk/ext/chat", `{"id":"t2","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"hi"}]}]}`, c...), "rate_limited")
	if evs := v.logOf("t2", azAdmin); len(evs) != 0 {
		t.Fatalf("a refused run was written: %s", evs)
	}
	v.mustDo(201, "POST", "/v1/threads/t2/runs", body, a...)
}

// Appends count by request and by byte, per key: a worker over either
// rate is refused and its events are not in the log; another worker's
// appends go on.
func TestLimitAppends(t *testing.T) {
	v := newAuthEnv(t, api.Options{MaxBodyBytes: 64 << 10, Limits: api.Limits{
		Appends: mustRate(t, "3/h"), AppendBytes: mustRate(t, "64KiB/h")}})
	w1 := v.workerRun("t1", azWorker)
	w2 := v.workerRun("t2", azWorker2)
	lease := func(c extClaim, tok string) []string {
		return append(bearer(tok), "Tether-Lease", c.Lease.Token)
	}
	start := `[{"type":"message.started","message_id":"a1","role":"assistant"}]`
	delta := func(n int) string {
		return `[{"type":"text.delta","message_id":"a1","delta":"` + strings.Repeat("x", n) + `"}]`
	}
	v.mustDo(200, "POST", "/v1/runs/"+w1.Run.ID+"/events", start, lease(w1, azWorker)...)
	v.mustDo(200, "POST", "/v1/runs/"+w1.Run.ID+"/events", delta(40<<10), lease(w1, azWorker)...)
	before := len(v.logOf("t1", azAdmin))
	// 40 KiB of the 64 KiB bucket is spent: another 40 KiB is too many bytes.
	limited(t, "bytes", v.do("POST", "/v1/runs/"+w1.Run.ID+"/events", delta(40<<10), lease(w1, azWorker)...), "rate_limited")
	v.mustDo(200, "POST", "/v1/runs/"+w1.Run.ID+"/events", delta(10), lease(w1, azWorker)...)
	// Three appends spent.
	limited(t, "appends", v.do("POST", "/v1/runs/"+w1.Run.ID+"/events", delta(10), lease(w1, azWorker)...), "rate_limited")
	if got := len(v.logOf("t1", azAdmin)); got != before+1 {
		t.Fatalf("log has %d events, want %d: a refused append was written", got, before+1)
	}
	// The other worker's key.
	v.mustDo(200, "POST", "/v1/runs/"+w2.Run.ID+"/events", start, lease(w2, azWorker2)...)
	v.mustDo(200, "POST", "/v1/runs/"+w2.Run.ID+"/events", delta(40<<10), lease(w2, azWorker2)...)
}

// A body of unknown length (chunked) passes the byte rate and is charged
// once read, so the next append waits for it.
func TestLimitAppendBytesChunked(t *testing.T) {
	v := newAuthEnv(t, api.Options{MaxBodyBytes: 64 << 10, Limits: api.Limits{AppendBytes: mustRate(t, "64KiB/h")}})
	w1 := v.workerRun("t1", azWorker)
	post := func(body string, chunked bool) *resp {
		var rd io.Reader = strings.NewReader(body)
		if chunked {
			rd = io.MultiReader(rd) // no length known
		}
		req, _ := http.NewRequest("POST", v.url+"/v1/runs/"+w1.Run.ID+"/events", rd)
		req.Header.Set("Authorization", "Bearer "+azWorker)
		req.Header.Set("Tether-Lease", w1.Lease.Token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return &resp{res.StatusCode, res.Header, b}
	}
	body := `[{"type":"message.created","message":{"id":"a1","role":"assistant","parts":[{"type":"text","text":"` + strings.Repeat("x", 40<<10) + `"}]}}]`
	if r := post(body, true); r.status != 200 {
		t.Fatalf("chunked: %d %s", r.status, r.body)
	}
	limited(t, "after a chunked body", post(strings.Replace(body, `"a1"`, `"a2"`, 1), false), "rate_limited")
}

// A key holds at most Limits.Streams long-lived requests: the next SSE
// stream, long poll, WebSocket, or run answered with its stream is
// refused (and that run is not created), while the streams open keep
// going and another key opens its own. Once one closes, a new one opens.
func TestLimitStreams(t *testing.T) {
	// A short heartbeat, so that the server sees a closed stream soon.
	v := newAuthEnv(t, api.Options{Heartbeat: 50 * time.Millisecond, Limits: api.Limits{Streams: 2}})
	c, a := bearer(azClient), bearer(azAdmin)
	v.mustDo(201, "POST", "/v1/threads", map[string]any{"id": "t1"}, c...)
	s1 := v.sse("GET", "/v1/threads/t1/events", nil, c...)
	s2 := v.sse("GET", "/v1/threads/t1/events", nil, c...)

	limited(t, "a third SSE stream", v.refused("GET", "/v1/threads/t1/events", "", append(c, "Accept", "text/event-stream")...), "rate_limited")
	limited(t, "a long poll", v.refused("GET", "/v1/threads/t1/events?wait=1000", "", append(c, "Accept", "application/json")...), "rate_limited")
	limited(t, "a Durable Streams long poll", v.refused("GET", "/v1/stream/threads/t1?offset=now&live=long-poll", "", c...), "rate_limited")
	limited(t, "a run's stream", v.refused("POST", "/v1/threads/t1/runs/stream", `{"agent":"demo","input":{"messages":[{"role":"user","content":"hi"}]}}`, c...), "rate_limited")
	_, res, err := v.dialWS("?access_token="+azClient, nil)
	if err == nil || res == nil || res.StatusCode != 429 {
		t.Fatalf("a WebSocket over the limit: %v %v", res, err)
	}
	// A catch-up without wait is not a stream.
	v.mustDo(200, "GET", "/v1/threads/t1/events?after=-1", nil, append(c, "Accept", "application/json")...)
	if evs := v.logOf("t1", azAdmin); len(evs) != 0 {
		t.Fatalf("the refused run was written: %s", evs)
	}

	// Another key opens a stream, and a run it starts reaches both of the
	// client's streams.
	s3 := v.sse("GET", "/v1/threads/t1/events", nil, a...)
	v.demoRunAs("t1", azAdmin)
	for i, s := range []*sseStream{s1, s2, s3} {
		if !s.until(string(tether.EventRunFinished)) {
			t.Fatalf("stream %d ended before the run finished", i+1)
		}
	}

	s1.close()
	testutil.Eventually(t, 10*time.Second, "a stream slot freed", func() bool {
		r := v.do("GET", "/v1/threads/t1/events?wait=1", nil, append(c, "Accept", "application/json")...)
		return r.status == 200
	})
	v.sse("GET", "/v1/threads/t1/events", nil, c...)
	s2.close()
}

// A run answered with its stream counts as one of its key's streams for
// as long as the stream is open, not only while its request is handled:
// on HTTP/1.1 the handler returns as soon as the connection is taken over,
// which gave the count back while the stream went on.
func TestLimitStreamsRunStream(t *testing.T) {
	v := newAuthEnv(t, api.Options{Heartbeat: 50 * time.Millisecond, Limits: api.Limits{Streams: 1}})
	c := bearer(azClient)
	v.mustDo(201, "POST", "/v1/threads", map[string]any{"id": "t1"}, c...)
	// A run of "ext" waits for a worker: its stream stays open.
	s := v.sse("POST", "/v1/threads/t1/runs/stream", map[string]any{"agent": "ext", "input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}}, c...)
	if !s.until(string(tether.EventRunCreated)) {
		t.Fatal("the run's stream ended")
	}
	limited(t, "an SSE stream beside a run's", v.refused("GET", "/v1/threads/t1/events", "", append(c, "Accept", "text/event-stream")...), "rate_limited")
	limited(t, "a long poll beside a run's stream", v.refused("GET", "/v1/threads/t1/events?wait=1000", "", append(c, "Accept", "application/json")...), "rate_limited")

	s.close()
	testutil.Eventually(t, 10*time.Second, "the run stream's slot freed", func() bool {
		return v.do("GET", "/v1/threads/t1/events?wait=1", nil, append(c, "Accept", "application/json")...).status == 200
	})
}

// demoRunAs starts a short demo run on thread with a token.
func (v *env) demoRunAs(thread, tok string) {
	v.t.Helper()
	v.mustDo(201, "POST", "/v1/threads/"+thread+"/runs", `{"agent":"demo","input":{"messages":[{"role":"user","content":"hi"}]},"metadata":{"demo":{"tokens":3,"delay_ms":1}}}`, bearer(tok)...)
}

// until reads frames until one of event type typ, and reports whether it
// came before the stream ended.
func (s *sseStream) until(typ string) bool {
	for {
		f, err := s.next()
		if err != nil {
			return false
		}
		if f.event == typ {
			return true
		}
	}
}

// With auth off, a client on loopback (the only user of a server that may
// run without keys) is not limited.
func TestLimitLoopbackWithoutKeys(t *testing.T) {
	v := newEnv(t, api.Options{Limits: api.Limits{Threads: mustRate(t, "1/h"), Streams: 1}})
	for i := range 3 {
		v.thread(fmt.Sprint("t", i))
	}
	v.sse("GET", "/v1/threads/t0/events", nil)
	v.sse("GET", "/v1/threads/t0/events", nil)
}

// Bodies in flight are capped server-wide: while one body holds the whole
// budget, another large request waits, then is refused 503 unavailable
// with Retry-After and writes nothing; once the first is done, the next
// goes through. Before: every body was read at once.
func TestBodyBudget(t *testing.T) {
	v := newEnvEngine(t, api.Options{MaxBodyBytes: 64 << 10, Limits: api.Limits{BodyBytes: 64 << 10, BodyWait: 50 * time.Millisecond}}, engine.Options{})
	v.thread("t1")
	run, lease := v.extRun("t1")
	big := func(id string) string {
		return `[{"type":"message.created","message":{"id":"` + id + `","role":"assistant","parts":[{"type":"text","text":"` + strings.Repeat("x", 40<<10) + `"}]}}]`
	}
	// The first body is sent slowly: it holds its bytes until it is read.
	body1 := big("m1")
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	req, _ := http.NewRequest("POST", v.url+"/v1/runs/"+run+"/events", pr)
	req.ContentLength = int64(len(body1))
	req.Header.Set(lease[0], lease[1])
	first := make(chan *http.Response, 1)
	go func() {
		res, _ := http.DefaultClient.Do(req) // nil on error: reported below
		first <- res
	}()
	if _, err := pw.Write([]byte(body1[:10])); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the first body's bytes taken", func() bool { return api.BodyBytesInUse(v.srv) > 0 })

	r := v.do("POST", "/v1/runs/"+run+"/events", big("m2"), lease...)
	if r.status != 503 || r.code() != "unavailable" || r.header.Get("Retry-After") == "" {
		t.Fatalf("second body: %d %s (Retry-After %q), want 503 unavailable", r.status, r.body, r.header.Get("Retry-After"))
	}
	// Small requests without a body are not held.
	v.mustDo(200, "GET", "/v1/threads/t1", nil)

	if _, err := io.Copy(pw, strings.NewReader(body1[10:])); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	res := <-first
	if res == nil || res.StatusCode != 200 {
		t.Fatalf("first body: %v", res)
	}
	res.Body.Close()
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", big("m3"), lease...)
	for _, ev := range v.readLog("t1") {
		if bytes.Contains(ev, []byte(`"m2"`)) {
			t.Fatalf("the refused body was written")
		}
	}
	if api.BodyBytesInUse(v.srv) != 0 {
		t.Fatalf("%d bytes still taken", api.BodyBytesInUse(v.srv))
	}
}

// Users of signed tokens are limited each on their own, whatever token
// they hold: two users behind one address do not share a bucket, and a
// fresh token does not give its user a new one.
func TestLimitPerUser(t *testing.T) {
	var c clock
	v := newTokenEnv(t, &c, api.Options{Limits: api.Limits{Threads: mustRate(t, "1/h")}})
	alice := mint(t, nil, userClaims(&c, "alice", nil))
	v.mustDo(201, "POST", "/v1/threads", map[string]any{"id": "a1"}, bearer(alice)...)
	c.advance(time.Second)
	again := mint(t, nil, userClaims(&c, "alice", nil))
	limited(t, "alice's second thread, with a new token", v.do("POST", "/v1/threads", map[string]any{"id": "a2"}, bearer(again)...), "rate_limited")
	bob := mint(t, nil, userClaims(&c, "bob", nil))
	v.mustDo(201, "POST", "/v1/threads", map[string]any{"id": "b1"}, bearer(bob)...)
}
