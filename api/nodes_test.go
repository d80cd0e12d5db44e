package api_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/store/natsstore"
	"github.com/tetherhq/tether/store/natsstore/natstest"
)

// tokenNodes starts n Tether nodes sharing one JetStream (an in-process
// nats-server), each with its own store handle, engine and API server
// taking the same signed tokens.
func tokenNodes(t *testing.T, n int, c *clock) []*env {
	t.Helper()
	ns := natstest.StartServer(t)
	out := make([]*env, n)
	for i := range out {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		st, err := natsstore.Open(ctx, natsstore.Options{URL: ns.ClientURL(), Node: fmt.Sprintf("n%d", i+1), Timeout: 20 * time.Second})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		e := engine.New(st, engine.Options{NodeID: fmt.Sprintf("n%d", i+1), LeaseTTL: 5 * time.Second,
			AcceptAgent: func(n string) bool { return n == "ext" }})
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		srv := api.New(e, api.Options{Tokens: api.TokenOptions{Secret: tkSecret, Audience: tkAudience, Now: c.now}})
		hs := httptest.NewServer(srv.Handler())
		t.Cleanup(func() {
			srv.Shutdown()
			hs.Close()
			e.Close()
			st.Close()
		})
		out[i] = &env{t: t, url: hs.URL, e: e, st: st, srv: srv, hs: hs}
	}
	return out
}

// On several nodes sharing a JetStream store, the same token works on
// every node and ownership is the same everywhere: a thread user A
// creates through one node is user A's on the others (read, followed,
// listed, run), and never user B's, whichever node user B asks.
func TestTokensOnNodes(t *testing.T) {
	var c clock
	nodes := tokenNodes(t, 3, &c)
	alice := bearer(mint(t, nil, userClaims(&c, "alice", nil)))
	bob := bearer(mint(t, nil, userClaims(&c, "bob", nil)))

	nodes[0].mustDo(201, "POST", "/v1/threads", `{"id":"tA"}`, alice...)
	var run tether.Run
	nodes[1].mustDo(201, "POST", "/v1/threads/tA/runs", `{"agent":"ext","input":{"messages":[{"role":"user","content":"`+aliceSecret+`"}]}}`, alice...).json(&run)
	nodes[2].mustDo(201, "POST", "/v1/threads", `{"id":"tB"}`, bob...)

	for i, v := range nodes {
		var snap tether.Snapshot
		v.mustDo(200, "GET", "/v1/threads/tA", nil, alice...).json(&snap)
		if len(snap.Runs) != 1 || snap.Runs[0].ID != run.ID || snap.Thread.Owner != "alice" {
			t.Fatalf("node %d: user A's thread: %+v %+v", i, snap.Thread, snap.Runs)
		}
		var page struct{ Threads []tether.Thread }
		v.mustDo(200, "GET", "/v1/threads", nil, alice...).json(&page)
		if len(page.Threads) != 1 || page.Threads[0].ID != "tA" || page.Threads[0].Owner != "alice" {
			t.Fatalf("node %d: user A lists %+v", i, page.Threads)
		}
		v.mustDo(200, "GET", "/v1/threads", nil, bob...).json(&page)
		if len(page.Threads) != 1 || page.Threads[0].ID != "tB" {
			t.Fatalf("node %d: user B lists %+v", i, page.Threads)
		}
		for _, path := range []string{"/v1/threads/tA", "/v1/threads/tA/events?after=-1", "/v1/runs/" + run.ID, "/v1/threads/tA/final-answer"} {
			r := v.do("GET", path, nil, append(bob, "Accept", "application/json")...)
			if r.status != 404 || strings.Contains(string(r.body), aliceSecret) {
				t.Errorf("node %d: user B GET %s: %d %s", i, path, r.status, r.body)
			}
		}
		if r := v.do("POST", "/v1/runs/"+run.ID+"/cancel", nil, bob...); r.status != 404 {
			t.Errorf("node %d: user B cancels user A's run: %d %s", i, r.status, r.body)
		}
		ws := v.ws("", bob...)
		ws.subscribe("s", "thread_id", "tA", "after", "-1")
		if m := ws.expect("error", "s"); m.Error.Code != "not_found" {
			t.Errorf("node %d: user B subscribes to tA: %s", i, m.raw)
		}
		// User A follows its thread on every node.
		s := v.sse("GET", "/v1/threads/tA/events?after=-1", nil, alice...)
		f, err := s.next()
		for err == nil && f.comment {
			f, err = s.next()
		}
		if err != nil || f.event != "connected" || !strings.Contains(f.data, "tA") {
			t.Fatalf("node %d: user A follows tA: %+v %v", i, f, err)
		}
		s.close()
	}
}

// A node on JetStream serves the store's delivery figures as metrics (a
// node on SQLite has none: TestHealthAndMetrics).
func TestDeliveryMetricsOnNATS(t *testing.T) {
	var c clock
	n := tokenNodes(t, 1, &c)[0]
	n.mustDo(201, "POST", "/v1/threads", `{"id":"t1"}`, bearer(mint(t, nil, userClaims(&c, "alice", nil)))...)
	m := string(n.mustDo(200, "GET", "/metrics", nil).body)
	for _, line := range []string{"tether_store_commits_awaiting_delivery 0", "tether_store_late_deliveries_total 0"} {
		if !strings.Contains(m, "\n"+line+"\n") {
			t.Errorf("metrics lack %q", line)
		}
	}
}
