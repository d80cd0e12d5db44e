package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
)

func TestThreadsREST(t *testing.T) {
	v := newEnv(t, api.Options{})
	r := v.mustDo(201, "POST", "/v1/threads", `{"id":"t1","metadata":{"user":"ann"}}`)
	var th map[string]any
	r.json(&th)
	if th["id"] != "t1" || th["status"] != "idle" || th["last_offset"] != "-1" || th["active_run_id"] != nil {
		t.Fatalf("thread: %s", r.body)
	}
	for _, k := range []string{"created_at", "updated_at"} {
		if s, _ := th[k].(string); !strings.HasSuffix(s, "Z") || len(s) != len("2006-01-02T15:04:05.000Z") {
			t.Fatalf("%s = %v, want RFC 3339 with milliseconds in UTC", k, th[k])
		}
	}
	v.mustDo(200, "POST", "/v1/threads", `{"id":"t1","metadata":{"user":"ann"}}`)
	if r := v.mustDo(409, "POST", "/v1/threads", `{"id":"t1","metadata":{"user":"bob"}}`); r.code() != "conflict" {
		t.Fatalf("code %s", r.code())
	}
	v.mustDo(201, "POST", "/v1/threads", nil) // a generated id
	for i := 0; i < 5; i++ {
		v.thread(fmt.Sprintf("p%d", i))
	}
	// Paging covers every thread once.
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		var page struct {
			Threads    []tether.Thread
			NextCursor *string `json:"next_cursor"`
		}
		v.mustDo(200, "GET", "/v1/threads?limit=3&cursor="+cursor, nil).json(&page)
		for _, th := range page.Threads {
			if seen[th.ID] {
				t.Fatalf("thread %s listed twice", th.ID)
			}
			seen[th.ID] = true
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
		if pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if len(seen) != 7 {
		t.Fatalf("listed %d threads, want 7", len(seen))
	}
	var busy struct{ Threads []tether.Thread }
	v.mustDo(200, "GET", "/v1/threads?status=busy", nil).json(&busy)
	if len(busy.Threads) != 0 {
		t.Fatalf("busy threads: %+v", busy.Threads)
	}
	v.mustDo(204, "DELETE", "/v1/threads/t1", nil)
	v.mustDo(404, "GET", "/v1/threads/t1", nil)
	v.mustDo(404, "GET", "/v1/threads/t1/final-answer", nil)
}

func TestRunRESTAndFinalAnswer(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.thread("t1")
	body := `{"agent":"demo","input":{"messages":[{"role":"user","content":"hello"}]},"metadata":{"demo":{"tokens":12,"delay_ms":1}}}`
	r := v.mustDo(201, "POST", "/v1/threads/t1/runs", body, "Idempotency-Key", "k-1")
	var run tether.Run
	r.json(&run)
	if run.Status != tether.RunPending || run.Agent != "demo" || r.header.Get("Location") != "/v1/runs/"+run.ID {
		t.Fatalf("run: %s (Location %q)", r.body, r.header.Get("Location"))
	}
	var again tether.Run
	v.mustDo(200, "POST", "/v1/threads/t1/runs", body, "Idempotency-Key", "k-1").json(&again)
	if again.ID != run.ID {
		t.Fatalf("idempotent retry made run %s, want %s", again.ID, run.ID)
	}
	v.waitRun(run.ID, tether.RunDone)
	var got struct {
		Run      tether.Run
		Messages []tether.Message
	}
	v.mustDo(200, "GET", "/v1/runs/"+run.ID, nil).json(&got)
	if len(got.Messages) != 2 || got.Messages[1].Role != tether.RoleAssistant || got.Messages[1].Status != tether.MessageDone {
		t.Fatalf("run messages: %+v", got.Messages)
	}
	var fa tether.FinalAnswer
	v.mustDo(200, "GET", "/v1/threads/t1/final-answer", nil).json(&fa)
	var text strings.Builder
	for _, p := range got.Messages[1].Parts {
		if p.Type == tether.PartText {
			text.WriteString(p.Text)
		}
	}
	if !fa.Complete || fa.Content == "" || fa.Content != text.String() || fa.RunID != run.ID {
		t.Fatalf("final answer %+v, text %q", fa, text.String())
	}
	var snap tether.Snapshot
	v.mustDo(200, "GET", "/v1/threads/t1", nil).json(&snap)
	if snap.Thread.Status != tether.ThreadIdle || snap.Offset != snap.Thread.LastOffset || len(snap.Runs) != 1 {
		t.Fatalf("snapshot: %+v", snap.Thread)
	}
}

func TestHealthAndMetrics(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.mustDo(200, "GET", "/healthz", nil)
	v.mustDo(200, "GET", "/readyz", nil)
	m := v.mustDo(200, "GET", "/metrics", nil)
	for _, name := range []string{"tether_events_committed_total", "tether_sse_streams", "tether_http_requests_total", "go_goroutines"} {
		if !strings.Contains(string(m.body), name) {
			t.Errorf("metrics lack %s", name)
		}
	}
	if strings.Contains(string(m.body), "tether_store_commits_awaiting_delivery") {
		t.Error("a node on SQLite serves the delivery figures of a shared log")
	}
	v.srv.Shutdown()
	v.mustDo(503, "GET", "/readyz", nil)
}

func TestAuth(t *testing.T) {
	const admin, worker, client = "admin-token-0123456789", "worker-token-0123456789", "client-token-0123456789"
	v := newEnv(t, api.Options{Keys: []api.Key{{Token: admin, Role: api.RoleAdmin}, {Token: worker, Role: api.RoleWorker}, {Token: client, Role: api.RoleClient}}})
	bearer := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	if r := v.mustDo(401, "GET", "/v1/threads", nil); r.code() != "unauthorized" || r.header.Get("WWW-Authenticate") == "" {
		t.Fatalf("no token: %s", r.body)
	}
	if r := v.mustDo(401, "GET", "/v1/threads", nil, bearer("nope-nope-nope-nope")...); r.code() != "unauthorized" {
		t.Fatal(r.code())
	}
	v.mustDo(200, "GET", "/v1/threads", nil, bearer(client)...)
	v.mustDo(200, "GET", "/v1/threads", nil, bearer(admin)...)
	if r := v.mustDo(403, "GET", "/v1/threads", nil, bearer(worker)...); r.code() != "forbidden" {
		t.Fatal(r.code())
	}
	if r := v.mustDo(403, "POST", "/v1/workers/claim", `{"worker_id":"w","agents":["demo"]}`, bearer(client)...); r.code() != "forbidden" {
		t.Fatal(r.code())
	}
	v.mustDo(204, "POST", "/v1/workers/claim", `{"worker_id":"w","agents":["x"],"wait_ms":0}`, bearer(worker)...)
	v.mustDo(200, "GET", "/healthz", nil) // health needs no token
}

func TestCORS(t *testing.T) {
	v := newEnv(t, api.Options{CORSOrigins: []string{"https://app.example"}})
	r := v.do("OPTIONS", "/v1/threads", nil, "Origin", "https://app.example", "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Headers", "authorization,last-event-id")
	if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		!strings.Contains(r.header.Get("Access-Control-Allow-Headers"), "Last-Event-ID") {
		t.Fatalf("preflight: %d %v", r.status, r.header)
	}
	r = v.do("GET", "/v1/threads", nil, "Origin", "https://evil.example")
	if r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatal("an unknown origin was allowed")
	}
	r = v.do("POST", "/v1/threads", `{}`, "Origin", "https://app.example")
	if !strings.Contains(r.header.Get("Access-Control-Expose-Headers"), "Location") {
		t.Fatalf("exposed headers: %q", r.header.Get("Access-Control-Expose-Headers"))
	}
}

func TestWorkerHTTP(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.mustDo(204, "POST", "/v1/workers/claim", `{"worker_id":"w1","agents":["echo"],"wait_ms":0}`)
	v.thread("t1")
	var run tether.Run
	v.mustDo(201, "POST", "/v1/threads/t1/runs", `{"agent":"echo","input":{"messages":[{"role":"user","content":"hi"}]}}`).json(&run)
	var claim struct {
		Run   tether.Run
		Lease struct {
			Token string
			TTLms int64 `json:"ttl_ms"`
		}
	}
	v.mustDo(200, "POST", "/v1/workers/claim", `{"worker_id":"w1","agents":["echo"],"wait_ms":1000}`).json(&claim)
	if claim.Run.ID != run.ID || claim.Lease.Token == "" || claim.Lease.TTLms <= 0 {
		t.Fatalf("claim: %+v", claim)
	}
	lease := []string{"Tether-Lease", claim.Lease.Token}
	evs := `[{"type":"message.started","message_id":"a1","role":"assistant"},{"type":"text.delta","message_id":"a1","delta":"hey"},{"type":"message.finished","message_id":"a1","status":"done"}]`
	var res struct {
		NextOffset      string `json:"next_offset"`
		LeaseExpiresAt  string `json:"lease_expires_at"`
		CancelRequested bool   `json:"cancel_requested"`
	}
	v.mustDo(200, "POST", "/v1/runs/"+run.ID+"/events", evs, lease...).json(&res)
	if res.NextOffset == "" || res.LeaseExpiresAt == "" {
		t.Fatalf("append: %+v", res)
	}
	v.mustDo(200, "POST", "/v1/runs/"+run.ID+"/heartbeat", nil, lease...)
	v.mustDo(202, "POST", "/v1/runs/"+run.ID+"/cancel", nil)
	v.mustDo(200, "POST", "/v1/runs/"+run.ID+"/heartbeat", nil, lease...).json(&res)
	if !res.CancelRequested {
		t.Fatal("heartbeat does not report the cancel request")
	}
	v.mustDo(200, "POST", "/v1/runs/"+run.ID+"/events", `[{"type":"run.finished","status":"cancelled"}]`, lease...)
	if r := v.mustDo(409, "POST", "/v1/runs/"+run.ID+"/events", evs, lease...); r.code() != "conflict" {
		t.Fatal(r.code())
	}
	var fa tether.FinalAnswer
	v.mustDo(200, "GET", "/v1/threads/t1/final-answer", nil).json(&fa)
	if fa.Content != "hey" || !fa.Complete || fa.Status != "cancelled" {
		t.Fatalf("final answer: %+v", fa)
	}
}

func TestInputOverHTTP(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.thread("t1")
	id := v.demoRun("t1", `{"tokens":5,"delay_ms":1,"ask":true}`)
	v.waitRun(id, tether.RunWaiting)
	var got struct{ Run tether.Run }
	v.mustDo(200, "GET", "/v1/runs/"+id, nil).json(&got)
	if got.Run.Request == nil {
		t.Fatal("waiting run has no request")
	}
	if r := v.mustDo(409, "POST", "/v1/runs/"+id+"/input", `{"request_id":"wrong","value":"x"}`); r.code() != "conflict" {
		t.Fatal(r.code())
	}
	v.mustDo(202, "POST", "/v1/runs/"+id+"/input", map[string]any{"request_id": got.Run.Request.ID, "value": "latency"})
	v.waitRun(id, tether.RunDone)
	var fa tether.FinalAnswer
	v.mustDo(200, "GET", "/v1/threads/t1/final-answer", nil).json(&fa)
	if !strings.Contains(fa.Content, "latency") {
		t.Fatalf("answer ignores the input: %q", fa.Content)
	}
}

func TestCancelDemoRun(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.thread("t1")
	id := v.demoRun("t1", `{"tokens":2000,"delay_ms":5}`)
	v.waitRun(id, tether.RunRunning)
	var run tether.Run
	v.mustDo(202, "POST", "/v1/runs/"+id+"/cancel", nil).json(&run)
	v.waitRun(id, tether.RunCancelled)
	var snap tether.Snapshot
	v.mustDo(200, "GET", "/v1/threads/t1", nil).json(&snap)
	if snap.Thread.Status != tether.ThreadIdle {
		t.Fatalf("thread after cancel: %s", snap.Thread.Status)
	}
	_ = json.Valid
}

func TestLongPollsEndAtShutdown(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.thread("t1")
	done := make(chan int, 2)
	go func() {
		done <- v.do("GET", "/v1/threads/t1/events?wait=20000&after=-1", nil, "Accept", "application/json").status
	}()
	go func() {
		done <- v.do("POST", "/v1/workers/claim", `{"worker_id":"w","agents":["nobody"],"wait_ms":20000}`).status
	}()
	time.Sleep(100 * time.Millisecond) // let both requests start waiting
	v.srv.Shutdown()
	for i := 0; i < 2; i++ {
		select {
		case status := <-done:
			if status != 200 && status != 204 {
				t.Fatalf("long poll answered %d at shutdown", status)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a long poll held the shutdown")
		}
	}
}

func TestCurlContentType(t *testing.T) {
	v := newEnv(t, api.Options{})
	// curl -d sends application/x-www-form-urlencoded; the body is JSON.
	v.mustDo(201, "POST", "/v1/threads", `{"id":"c1"}`, "Content-Type", "application/x-www-form-urlencoded")
	if r := v.mustDo(400, "POST", "/v1/threads", `{"id":"c2"}`, "Content-Type", "multipart/form-data; boundary=x"); r.code() != "bad_request" {
		t.Fatal(r.code())
	}
}
