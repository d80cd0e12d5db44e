package api_test

import (
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
)

// A user follows only its threads: user B's SSE stream of user A's thread
// ends not_found before any event; its listing holds its own
// threads and those its patterns match, never another's; a thread ID
// another user took is a conflict, not a way in.
func TestUserThreads(t *testing.T) {
	var c clock
	v := newTokenEnv(t, &c, api.Options{})
	f := v.tokenFixture(&c)
	a, b := bearer(f.alice), bearer(f.bob)

	// User A follows the run AG-UI calls current.
	s := v.sse("GET", "/v1/ag-ui/threads/tA/runs/current/events", nil, a...)
	s.close()
	// Tether's streams answer ":ok" before the rights are read from the
	// store, and end in-band; AG-UI's, whose clients know only statuses,
	// answer 404.
	for _, path := range []string{"/v1/threads/tA/events", "/v1/runs/" + f.runID + "/events"} {
		r := v.do("GET", path, nil, append(b, "Accept", "text/event-stream")...)
		if r.status != 200 || !strings.Contains(string(r.body), `event: end`+"\n"+`data: {"reason":"error","error":{"code":"not_found",`) ||
			strings.Contains(string(r.body), aliceSecret) || strings.Contains(string(r.body), "connected") {
			t.Errorf("user B follows %s: %d %s", path, r.status, r.body)
		}
	}
	for _, path := range []string{"/v1/ag-ui/threads/tA/events", "/v1/ag-ui/threads/tA/runs/current/events"} {
		r := v.do("GET", path, nil, append(b, "Accept", "text/event-stream")...)
		if r.status != 404 || strings.Contains(string(r.body), aliceSecret) {
			t.Errorf("user B follows %s: %d %s", path, r.status, r.body)
		}
	}

	if r := v.do("POST", "/v1/threads", `{"id":"bob-1"}`, b...); r.status != 201 {
		t.Fatalf("user B creates bob-1: %d %s", r.status, r.body)
	}
	// An admin's thread under bob's pattern is bob's to see.
	v.mustDo(201, "POST", "/v1/threads", `{"id":"bob-shared"}`, bearer(azAdmin)...)
	list := func(tok string) []string {
		var page struct{ Threads []tether.Thread }
		v.mustDo(200, "GET", "/v1/threads?limit=1000", nil, bearer(tok)...).json(&page)
		var ids []string
		for _, th := range page.Threads {
			ids = append(ids, th.ID+"@"+th.Owner)
		}
		return ids
	}
	if got := strings.Join(list(f.alice), " "); got != "tA@alice" {
		t.Errorf("user A lists %s", got)
	}
	bobMint := mint(t, nil, userClaims(&c, "bob", map[string]any{"threads": []string{"bob-*"}}))
	if got := strings.Join(list(bobMint), " "); got != "bob-shared@ bob-1@bob" {
		t.Errorf("user B (threads bob-*) lists %s", got)
	}
	if got := list(azAdmin); len(got) != 3 {
		t.Errorf("an admin lists %v", got)
	}

	// tA is taken: user B learns that and nothing more.
	r := v.do("POST", "/v1/threads", `{"id":"tA"}`, b...)
	if r.status != 409 || strings.Contains(string(r.body), "alice") {
		t.Errorf("user B creates tA: %d %s", r.status, r.body)
	}
	// Creating its own again is idempotent.
	v.mustDo(200, "POST", "/v1/threads", `{"id":"bob-1"}`, b...)
	v.mustDo(200, "POST", "/v1/threads", `{"id":"tA"}`, a...)
}

// The rights of Tether's claim: create, run, cancel and answer default to
// true and each can be taken away (403 on a thread the token sees, as
// opposed to 404 on one it does not); a worker token claims only the
// agents of its claim.
func TestTokenRights(t *testing.T) {
	var c clock
	v := newTokenEnv(t, &c, api.Options{})
	f := v.tokenFixture(&c)
	readOnly := mint(t, nil, userClaims(&c, "alice", map[string]any{"create": false, "run": false, "cancel": false, "answer": false}))
	ro := bearer(readOnly)
	v.mustDo(200, "GET", "/v1/threads/tA", nil, ro...)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/threads", `{"id":"new"}`},
		{"POST", "/v1/threads/tA/runs", `{"agent":"demo"}`},
		{"POST", "/v1/runs/" + f.runID + "/cancel", ``},
		{"POST", "/v1/runs/" + f.runID + "/input", `{"request_id":"q","value":1}`},
		{"POST", "/v1/ai-sdk/demo/chat/tA/stop", ``},
		{"POST", "/v1/ai-sdk/demo/chat", `{"id":"tA","trigger":"submit-message","messages":[{"id":"u9","role":"user","parts":[{"type":"text","text":"hi"}]}]}`},
		{"POST", "/v1/ai-sdk/demo/chat", `{"id":"fresh2","trigger":"submit-message","messages":[{"id":"u9","role":"user","parts":[{"type":"text","text":"hi"}]}]}`},
		{"POST", "/v1/ag-ui/demo", `{"threadId":"tA","runId":"x","state":{},"messages":[],"tools":[],"context":[],"forwardedProps":{}}`},
		{"POST", "/v1/ag-ui/demo", `{"threadId":"fresh","runId":"x","state":{},"messages":[],"tools":[],"context":[],"forwardedProps":{}}`},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		if r := v.do(c.method, c.path, body, ro...); r.status != 403 || r.code() != "forbidden" {
			t.Errorf("%s %s without the right: %d %s", c.method, c.path, r.status, r.body)
		}
	}
	var run struct{ Run tether.Run }
	v.mustDo(200, "GET", "/v1/runs/"+f.runID, nil, ro...).json(&run)
	if !run.Run.CancelRequestedAt.IsZero() {
		t.Fatal("the run was cancelled by a token without the cancel right")
	}

	// A worker token scoped to agent ext.
	w := bearer(f.workerX)
	if r := v.do("POST", "/v1/workers/claim", `{"worker_id":"w","agents":["other"],"wait_ms":0}`, w...); r.status != 403 {
		t.Errorf("worker X claims agent other: %d %s", r.status, r.body)
	}
	if r := v.do("POST", "/v1/workers/claim", `{"worker_id":"w","agents":["ext","other"],"wait_ms":0}`, w...); r.status != 403 {
		t.Errorf("worker X claims agents ext and other: %d %s", r.status, r.body)
	}
	// Its lease is bound to its subject: a refreshed token of the same
	// worker goes on with the run it holds; another worker's may not.
	c.advance(time.Minute)
	refreshed := mint(t, nil, userClaims(&c, "worker-x", map[string]any{"role": "worker", "agents": []string{"ext"}}))
	if refreshed == f.workerX {
		t.Fatal("the refreshed token is the same")
	}
	ev := `[{"type":"message.started","message_id":"w1","role":"assistant"}]`
	v.mustDo(200, "POST", "/v1/runs/"+f.runID+"/events", ev, append(bearer(refreshed), "Tether-Lease", f.lease)...)
	other := mint(t, nil, userClaims(&c, "worker-y", map[string]any{"role": "worker"}))
	if r := v.do("POST", "/v1/runs/"+f.runID+"/heartbeat", nil, append(bearer(other), "Tether-Lease", f.lease)...); r.status != 410 {
		t.Errorf("another worker's token with the lease: %d %s", r.status, r.body)
	}
	if r := v.do("GET", "/v1/runs/"+f.runID, nil, bearer(other)...); r.status != 403 {
		t.Errorf("another worker reads the run: %d %s", r.status, r.body)
	}
}

// User B cannot tell user A's thread from one that does not exist: every
// route answers both alike, status and body, but for the id.
func TestOthersThreadLooksMissing(t *testing.T) {
	var c clock
	v := newTokenEnv(t, &c, api.Options{})
	f := v.tokenFixture(&c)
	b := append(bearer(f.bob), "Accept", "application/json")
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v1/threads/{t}", ""},
		{"GET", "/v1/threads/{t}/events?after=-1", ""},
		{"GET", "/v1/threads/{t}/final-answer", ""},
		{"POST", "/v1/threads/{t}/runs", `{"agent":"ext"}`},
		{"DELETE", "/v1/threads/{t}", ""},
		{"GET", "/v1/ag-ui/threads/{t}/events", ""},
		{"GET", "/v1/ai-sdk/ext/chat/{t}/messages", ""},
		{"GET", "/v1/ai-sdk/ext/chat/{t}/stream", ""},
		{"GET", "/v1/ai-sdk/ext/chat/{t}/stream?after=-1", ""},
		{"POST", "/v1/ai-sdk/ext/chat/{t}/stop", ""},
		{"GET", "/v1/stream/threads/{t}?offset=-1", ""},
	} {
		answer := func(id string) (int, string) {
			var body any
			if r.body != "" {
				body = strings.ReplaceAll(r.body, "{t}", id)
			}
			res := v.do(r.method, strings.ReplaceAll(r.path, "{t}", id), body, b...)
			return res.status, strings.ReplaceAll(string(res.body), id, "{t}")
		}
		s1, b1 := answer("tA")
		s2, b2 := answer("nope")
		if s1 != s2 || b1 != b2 {
			t.Errorf("%s %s: user A's thread %d %s; no thread %d %s", r.method, r.path, s1, b1, s2, b2)
		}
	}
}
