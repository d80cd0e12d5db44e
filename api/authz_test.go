package api_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/agents/demo"
	"github.com/tetherhq/tether/agents/runner"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/streams"
	"github.com/tetherhq/tether/streams/wake"
)

// The tokens of an authz env: one key per role, and a second worker.
const (
	azAdmin   = "admin-token-0123456789"
	azClient  = "client-token-0123456789"
	azWorker  = "worker-token-0123456789"
	azWorker2 = "worker2-token-0123456789"
)

func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

// newAuthEnv is a server with every route mounted (REST, workers,
// WebSocket, Durable Streams and their subscriptions), keys for every role
// and two workers, and the in-process demo agent. Runs of agent "ext" wait
// for a worker. opts adds to the options (its Keys are replaced).
func newAuthEnv(t *testing.T, opts api.Options) *env {
	t.Helper()
	st := testutil.OpenStore(t, "")
	e := engine.New(st, engine.Options{LeaseTTL: 5 * time.Second,
		AcceptAgent: func(n string) bool { return n == "demo" || n == "ext" }})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	rn := runner.New(e, map[string]agents.Agent{"demo": demo.New()}, runner.Options{})
	rn.Start()
	var wk *wake.Manager
	ds := streams.New(st, e.Hub(), streams.Options{OnAppend: func(p string) { wk.Notify(p) },
		OnDelete: func(p string) { wk.Deleted(p) }})
	wk = wake.New(ds, st, wake.Options{})
	if err := ds.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := wk.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	opts.Streams, opts.Wake = ds, wk
	if opts.LongPollTimeout == 0 {
		opts.LongPollTimeout = 200 * time.Millisecond
	}
	opts.Keys = []api.Key{
		{Token: azAdmin, Role: api.RoleAdmin, Name: "admin"},
		{Token: azClient, Role: api.RoleClient, Name: "client"},
		{Token: azWorker, Role: api.RoleWorker, Name: "worker"},
		{Token: azWorker2, Role: api.RoleWorker, Name: "worker2"},
	}
	srv := api.New(e, opts)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rn.Shutdown(ctx)
		srv.Shutdown()
		hs.Close()
		wk.Close()
		ds.Close()
		e.Close()
	})
	return &env{t: t, url: hs.URL, e: e, st: st, srv: srv, hs: hs}
}

// extClaim is a worker's claim as the tests read it.
type extClaim struct {
	Run   tether.Run `json:"run"`
	Lease struct {
		Token string `json:"token"`
	} `json:"lease"`
	Offset tether.Offset `json:"offset"`
}

// extRun creates a run of agent "ext" on a new thread and has the worker
// with token tok claim it.
func (v *env) workerRun(thread, tok string) extClaim {
	v.t.Helper()
	v.mustDo(204, "POST", "/v1/workers/claim", `{"worker_id":"w","agents":["ext"],"wait_ms":0}`, bearer(tok)...)
	v.mustDo(201, "POST", "/v1/threads", map[string]any{"id": thread}, bearer(azClient)...)
	v.mustDo(201, "POST", "/v1/threads/"+thread+"/runs",
		`{"agent":"ext","input":{"messages":[{"id":"in1","role":"user","content":"my secret question"}]}}`, bearer(azClient)...)
	var c extClaim
	v.mustDo(200, "POST", "/v1/workers/claim", `{"worker_id":"w-`+thread+`","agents":["ext"],"wait_ms":5000}`, bearer(tok)...).json(&c)
	if c.Lease.Token == "" || c.Run.ThreadID != thread {
		v.t.Fatalf("claim: %+v", c)
	}
	return c
}

// A worker token reads nothing of /v1/stream/: not a thread's log (which
// holds the users' input), not a generic stream, not a subscription; and
// it may not create, append to or delete any of them. Before: 200 with the
// whole log, 201 for a new stream.
func TestWorkerTokenStreams(t *testing.T) {
	v := newAuthEnv(t, api.Options{})
	v.workerRun("t1", azWorker)
	w := bearer(azWorker)
	if r := v.do("GET", "/v1/stream/threads/t1?offset=-1", nil, w...); r.status != 403 || strings.Contains(string(r.body), "my secret question") {
		t.Fatalf("worker reads a thread log: %d %s", r.status, r.body)
	}
	v.mustDo(201, "PUT", "/v1/stream/s1", `{"a":1}`, append(bearer(azClient), "Content-Type", "application/json")...)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/stream/s1?offset=-1", ""},
		{"HEAD", "/v1/stream/s1", ""},
		{"PUT", "/v1/stream/s2", `{"a":1}`},
		{"POST", "/v1/stream/s1", `{"b":2}`},
		{"DELETE", "/v1/stream/s1", ""},
		{"PUT", "/v1/stream/__ds/subscriptions/sub1", `{"type":"pull-wake","pattern":"**","wake_stream":"wakes"}`},
		{"GET", "/v1/stream/__ds/subscriptions/sub1", ""},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		if r := v.do(c.method, c.path, body, w...); r.status != 403 {
			t.Errorf("worker %s %s: %d %s, want 403", c.method, c.path, r.status, r.body)
		}
	}
	// The stream is untouched and a client still reads it.
	if r := v.mustDo(200, "GET", "/v1/stream/s1?offset=-1", nil, bearer(azClient)...); string(r.body) != `[{"a":1}]` {
		t.Fatalf("stream after the worker's tries: %s", r.body)
	}
}

// A worker reads only runs it holds or held: not another worker's, not
// one of the in-process agent's, neither the run nor its events, over
// REST, SSE, the JSON poll or the WebSocket. Before: 200 for all.
func TestWorkerReadsOnlyItsRuns(t *testing.T) {
	v := newAuthEnv(t, api.Options{})
	mine := v.workerRun("t1", azWorker)
	theirs := v.workerRun("t2", azWorker2)
	w := bearer(azWorker)

	v.mustDo(200, "GET", "/v1/runs/"+mine.Run.ID, nil, w...)
	v.mustDo(200, "GET", "/v1/runs/"+mine.Run.ID+"/events?after=-1", nil, append(w, "Accept", "application/json")...)
	for _, path := range []string{"/v1/runs/" + theirs.Run.ID, "/v1/runs/" + theirs.Run.ID + "/events?after=-1"} {
		for _, accept := range []string{"application/json", "text/event-stream"} {
			r := v.do("GET", path, nil, append(w, "Accept", accept)...)
			// An SSE stream answers ":ok" before the rights are read from
			// the store, and ends in-band.
			refused := r.status == 403
			if strings.HasSuffix(path, "events?after=-1") && accept == "text/event-stream" {
				refused = r.status == 200 && strings.Contains(string(r.body), "event: end\n"+`data: {"reason":"error","error":{"code":"forbidden",`) &&
					!strings.Contains(string(r.body), "connected")
			}
			if !refused || strings.Contains(string(r.body), "my secret question") {
				t.Errorf("worker reads another worker's run: GET %s (%s): %d %s", path, accept, r.status, r.body)
			}
		}
	}

	ws := v.ws("", w...)
	ws.subscribe("mine", "run_id", mine.Run.ID, "after", "now")
	ws.expect("subscribed", "mine")
	ws.subscribe("theirs", "run_id", theirs.Run.ID, "after", "-1")
	if m := ws.expect("error", "theirs"); m.Error.Code != "forbidden" {
		t.Fatalf("worker subscribes to another worker's run: %s", m.raw)
	}
	ws.subscribe("both", "thread_id", "t2", "run_id", theirs.Run.ID)
	if m := ws.expect("error", "both"); m.Error.Code != "forbidden" {
		t.Fatalf("worker subscribes to another worker's run by thread: %s", m.raw)
	}

	// A run the worker held stays readable after it finished.
	v.mustDo(200, "POST", "/v1/runs/"+mine.Run.ID+"/events", `[{"type":"run.finished","status":"done"}]`,
		append(w, "Tether-Lease", mine.Lease.Token)...)
	v.mustDo(200, "GET", "/v1/runs/"+mine.Run.ID, nil, w...)
}

// A lease is bound to the key that claimed it: another worker key holding
// the token gets lease_lost on appends and heartbeats. Before: 200.
func TestLeaseBoundToKey(t *testing.T) {
	v := newAuthEnv(t, api.Options{})
	c := v.workerRun("t1", azWorker)
	stolen := append(bearer(azWorker2), "Tether-Lease", c.Lease.Token)
	path := "/v1/runs/" + c.Run.ID
	if r := v.do("POST", path+"/events", `[{"type":"message.started","message_id":"x","role":"assistant"}]`, stolen...); r.status != 410 || r.code() != "lease_lost" {
		t.Fatalf("append under another worker's key: %d %s", r.status, r.body)
	}
	if r := v.do("POST", path+"/heartbeat", nil, stolen...); r.status != 410 || r.code() != "lease_lost" {
		t.Fatalf("heartbeat under another worker's key: %d %s", r.status, r.body)
	}
	own := append(bearer(azWorker), "Tether-Lease", c.Lease.Token)
	v.mustDo(200, "POST", path+"/events", `[{"type":"message.started","message_id":"x","role":"assistant"}]`, own...)
	v.mustDo(200, "POST", path+"/heartbeat", nil, own...)
	// An admin token is a key too: it did not claim the run.
	if r := v.do("POST", path+"/heartbeat", nil, append(bearer(azAdmin), "Tether-Lease", c.Lease.Token)...); r.status != 410 {
		t.Fatalf("heartbeat under the admin key: %d %s", r.status, r.body)
	}
}

// After a cancel request a worker may end the run only cancelled; its
// run.finished done is refused (409) and the run ends cancelled. Before:
// 200 and the run ended done.
func TestCancelRequestedRunEndsCancelled(t *testing.T) {
	v := newAuthEnv(t, api.Options{})
	c := v.workerRun("t1", azWorker)
	lease := append(bearer(azWorker), "Tether-Lease", c.Lease.Token)
	path := "/v1/runs/" + c.Run.ID
	v.mustDo(202, "POST", path+"/cancel", nil, bearer(azClient)...)
	if r := v.do("POST", path+"/events", `[{"type":"run.finished","status":"done"}]`, lease...); r.status != 409 || r.code() != "conflict" {
		t.Fatalf("run.finished done after a cancel request: %d %s", r.status, r.body)
	}
	if r := v.do("POST", path+"/events", `[{"type":"run.finished","status":"error","error":{"code":"x","message":"y"}}]`, lease...); r.status != 409 {
		t.Fatalf("run.finished error after a cancel request: %d %s", r.status, r.body)
	}
	v.mustDo(200, "POST", path+"/events", `[{"type":"run.finished","status":"cancelled"}]`, lease...)
	var got struct{ Run tether.Run }
	v.mustDo(200, "GET", path, nil, bearer(azClient)...).json(&got)
	if got.Run.Status != tether.RunCancelled {
		t.Fatalf("run ended %s, want cancelled", got.Run.Status)
	}
}

// A worker may not change the run's input (the user's messages). Before:
// 200, and the user's message carried the worker's metadata.
func TestWorkerMayNotUpdateInput(t *testing.T) {
	v := newAuthEnv(t, api.Options{})
	c := v.workerRun("t1", azWorker)
	lease := append(bearer(azWorker), "Tether-Lease", c.Lease.Token)
	path := "/v1/runs/" + c.Run.ID + "/events"
	if r := v.do("POST", path, `[{"type":"message.updated","message_id":"in1","metadata":{"approved":true}}]`, lease...); r.status != 400 || r.code() != "bad_request" {
		t.Fatalf("message.updated of the input: %d %s", r.status, r.body)
	}
	// Its own messages it may update.
	v.mustDo(200, "POST", path, `[{"type":"message.started","message_id":"a1","role":"assistant"},{"type":"message.updated","message_id":"a1","metadata":{"k":1}}]`, lease...)
	var snap tether.Snapshot
	v.mustDo(200, "GET", "/v1/threads/t1", nil, bearer(azClient)...).json(&snap)
	for _, m := range snap.Messages {
		if m.ID == "in1" && len(m.Metadata) > 0 && string(m.Metadata) != "{}" {
			t.Fatalf("the input message changed: %s", m.Metadata)
		}
	}
}

// Two Authorization headers are refused, whatever their order. Before: the
// first won.
func TestTwoAuthorizationHeaders(t *testing.T) {
	v := newAuthEnv(t, api.Options{})
	for _, pair := range [][2]string{{azClient, "nope-nope-nope-nope"}, {"nope-nope-nope-nope", azClient}, {azClient, azAdmin}} {
		req, _ := http.NewRequest("GET", v.url+"/v1/threads", nil)
		req.Header.Add("Authorization", "Bearer "+pair[0])
		req.Header.Add("Authorization", "Bearer "+pair[1])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 400 || !strings.Contains(string(b), `"bad_request"`) {
			t.Errorf("two Authorization headers %v: %d %s", pair, res.StatusCode, b)
		}
	}
}

// An unknown or repeated ?status= filter is refused, not ignored. Before:
// the second value was ignored and an empty one listed everything.
func TestThreadStatusFilter(t *testing.T) {
	v := newAuthEnv(t, api.Options{})
	c := bearer(azClient)
	v.mustDo(200, "GET", "/v1/threads?status=idle", nil, c...)
	for _, q := range []string{"status=bogus", "status=idle&status=bogus", "status=", "limit=5&limit=6", "status=idle&status=idle"} {
		if r := v.do("GET", "/v1/threads?"+q, nil, c...); r.status != 400 || r.code() != "bad_request" {
			t.Errorf("GET /v1/threads?%s: %d %s", q, r.status, r.body)
		}
	}
}

// The auth scheme is case-insensitive (RFC 9110 §11.1): "BEARER" and
// "bearer" name the same scheme as "Bearer", and a token after more than
// one space is the same token.
func TestBearerSchemeAnyCase(t *testing.T) {
	v := newAuthEnv(t, api.Options{})
	for _, h := range []string{"Bearer " + azClient, "bearer " + azClient, "BEARER " + azClient, "BeArEr  " + azClient} {
		v.mustDo(200, "GET", "/v1/threads", nil, "Authorization", h)
	}
	for _, h := range []string{"Basic " + azClient, "Bearer", "Bearer ", azClient, "Bearer" + azClient} {
		if r := v.do("GET", "/v1/threads", nil, "Authorization", h); r.status != 401 {
			t.Fatalf("Authorization %q: %d, want 401", h, r.status)
		}
	}
}
