package cluster

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store/natsstore/natstest"
)

// TestDeleteWhileNodeCutOff: node b is cut off from NATS while a thread it
// holds (in memory, with an open stream) is deleted through node a. Once b
// is back, it has heard of the deletion: its stream of the thread ends and
// it answers 404, as when it was connected (TestDeleteSeenByOtherNodes).
func TestDeleteWhileNodeCutOff(t *testing.T) {
	srv := natstest.StartServer(t)
	js := &jetStream{srvs: []*server.Server{srv}, urls: srv.ClientURL()}
	o := nodeOptions{Replicas: 1, StoreTimeout: 2 * time.Second}
	a := startNode(t, js, "a", o)
	proxy := startCutProxy(t, strings.TrimPrefix(srv.ClientURL(), "nats://"))
	o.URL = "nats://" + proxy.addr
	b := startNode(t, js, "b", o)

	a.createThread(t, "t1")
	b.mustCall(t, "GET", "/v1/threads/t1", nil, http.StatusOK, nil) // b holds t1
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	st, err := b.openStream(ctx, "/v1/threads/t1/events", "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	for live := false; !live; { // live once it pings
		f, err := st.next()
		if err != nil {
			t.Fatalf("b's stream ended before it was live: %v", err)
		}
		live = f.Event == "ping"
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			if _, err := st.next(); err != nil {
				return
			}
		}
	}()

	proxy.setCut(true)
	a.mustCall(t, "DELETE", "/v1/threads/t1", nil, http.StatusNoContent, nil)
	proxy.setCut(false)

	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Errorf("node b's stream of the thread deleted while b was cut off is still open 20s after b was back")
	}
	eventually(t, 10*time.Second, "node b to answer 404 for the thread deleted while it was cut off", func() bool {
		status, _, _, err := b.call(t.Context(), "GET", "/v1/threads/t1", nil)
		return err == nil && status == http.StatusNotFound
	})
}

// TestRecreatedWhileNodeCutOff: node b is cut off from NATS while a thread
// it holds is deleted and created again (same ID) through node a. Once b
// is back, it shows the new thread as a does, nothing of the old one: its
// log and its snapshot (TestRecreatedThreadOnOtherNodes, with b connected).
func TestRecreatedWhileNodeCutOff(t *testing.T) {
	srv := natstest.StartServer(t)
	js := &jetStream{srvs: []*server.Server{srv}, urls: srv.ClientURL()}
	o := nodeOptions{Replicas: 1, StoreTimeout: 2 * time.Second}
	a := startNode(t, js, "a", o)
	proxy := startCutProxy(t, strings.TrimPrefix(srv.ClientURL(), "nats://"))
	o.URL = "nats://" + proxy.addr
	b := startNode(t, js, "b", o)
	a.createThread(t, "t1")
	a.demoRun(t, "t1", "first", `{"tokens":5,"delay_ms":0}`)
	eventually(t, 10*time.Second, "node b to see the first run end", func() bool {
		var snap tether.Snapshot
		b.mustCall(t, "GET", "/v1/threads/t1", nil, http.StatusOK, &snap)
		return snap.Thread.Status == tether.ThreadIdle
	})
	proxy.setCut(true)
	a.mustCall(t, "DELETE", "/v1/threads/t1", nil, http.StatusNoContent, nil)
	a.createThread(t, "t1")
	r2 := a.demoRun(t, "t1", "second", `{"tokens":3,"delay_ms":0}`)
	a.waitRun(t, r2.ID, 10*time.Second, "done", func(r tether.Run) bool { return r.Status == tether.RunDone })
	var want, got tether.Snapshot
	a.mustCall(t, "GET", "/v1/threads/t1", nil, http.StatusOK, &want)
	proxy.setCut(false)
	eventually(t, 15*time.Second, "node b to show the new thread as node a does", func() bool {
		b.mustCall(t, "GET", "/v1/threads/t1", nil, http.StatusOK, &got)
		return got.Offset == want.Offset
	})
	if len(got.Messages) != len(want.Messages) || len(got.Runs) != len(want.Runs) {
		t.Fatalf("node b shows %d messages and %d runs, node a %d and %d", len(got.Messages), len(got.Runs), len(want.Messages), len(want.Runs))
	}
	la := a.readLog(t, "/v1/threads/t1/events")
	lb := b.readLog(t, "/v1/threads/t1/events")
	sameLog(t, "node b's log of the new thread", lb, la)
}
