package cluster

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store/natsstore/natstest"
)

// cutPair starts a NATS server and two nodes on it: a directly, b through
// a proxy the test cuts and restores (a store request timeout of 2 s).
func cutPair(t *testing.T) (a, b *node, proxy *cutProxy) {
	t.Helper()
	srv := natstest.StartServer(t)
	js := &jetStream{srvs: []*server.Server{srv}, urls: srv.ClientURL()}
	o := nodeOptions{Replicas: 1, StoreTimeout: 2 * time.Second}
	a = startNode(t, js, "a", o)
	proxy = startCutProxy(t, strings.TrimPrefix(srv.ClientURL(), "nats://"))
	o.URL = "nats://" + proxy.addr
	return a, startNode(t, js, "b", o), proxy
}

// TestDeleteWhileNodeCutOff: node b is cut off from NATS while a thread it
// holds (in memory, with an open stream) is deleted through node a. Once b
// is back, it has heard of the deletion: its stream of the thread ends and
// it answers 404, as when it was connected (TestDeleteSeenByOtherNodes).
func TestDeleteWhileNodeCutOff(t *testing.T) {
	a, b, proxy := cutPair(t)

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
	a, b, proxy := cutPair(t)
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

// TestStreamsEndWhileNodeCutOff: node b is cut off from NATS while a run
// goes on through node a. b's open stream of the thread ends with
// reconnect (unavailable) once b has not followed the log for its store's
// request timeout (2s here), instead of staying open and silent, pings
// and all, for as long as the partition lasts; a new stream on b gets the
// same answer. The client resumes on a from the last event it got: it
// has the whole log, nothing twice. Once b is back, streams start on it
// again.
func TestStreamsEndWhileNodeCutOff(t *testing.T) {
	a, b, proxy := cutPair(t)
	a.createThread(t, "t1")
	const cursor = "-1" // the whole log

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	st, err := b.openStream(ctx, "/v1/threads/t1/events?after="+cursor, "")
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
	proxy.setCut(true)
	r := a.demoRun(t, "t1", "hello", `{"tokens":3,"delay_ms":0}`)
	a.waitRun(t, r.ID, 10*time.Second, "done", func(r tether.Run) bool { return r.Status == tether.RunDone })

	var got []seenEvent
	cut := time.Now()
	for {
		f, err := st.next()
		if err != nil {
			t.Fatalf("b's stream ended without reconnect (%v), %v after b was cut off", err, time.Since(cut).Round(time.Millisecond))
		}
		if f.Event == "reconnect" {
			if !strings.Contains(f.Data, `"reason":"unavailable"`) {
				t.Fatalf("b's stream ended with reconnect %s, want reason unavailable", f.Data)
			}
			break
		}
		if f.HasID {
			ev, err := eventOf(f)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ev)
		}
		if time.Since(cut) > 20*time.Second {
			t.Fatalf("b's stream is still open %v after b was cut off (last frame %s)", time.Since(cut).Round(time.Millisecond), f.Event)
		}
	}
	st.close()

	// A new stream on b, cut off: told to reconnect too.
	st2, err := b.openStream(ctx, "/v1/threads/t1/events?after="+cursor, "")
	if err != nil {
		t.Fatal(err)
	}
	for {
		f, err := st2.next()
		if err != nil {
			t.Fatalf("a new stream on b ended without reconnect: %v", err)
		}
		if f.Event == "reconnect" {
			break
		}
		if f.Event == "ping" {
			t.Fatalf("a new stream on b, cut off, is live")
		}
	}
	st2.close()
	// And b says so to load balancers; a does not.
	for _, c := range []struct {
		p    *node
		want int
	}{{b, http.StatusServiceUnavailable}, {a, http.StatusOK}} {
		if status, body, _, err := c.p.call(t.Context(), "GET", "/readyz", nil); err != nil || status != c.want {
			t.Fatalf("%s: /readyz while b is cut off: %d %v %s, want %d", c.p.name, status, err, body, c.want)
		}
	}

	// The client resumes on a.
	resume := cursor
	if len(got) > 0 {
		resume = got[len(got)-1].Offset
	}
	st3, err := a.openStream(ctx, "/v1/threads/t1/events?after="+resume, "")
	if err != nil {
		t.Fatal(err)
	}
	want := a.readLog(t, "/v1/threads/t1/events")
	for len(got) < len(want) {
		f, err := st3.next()
		if err != nil {
			t.Fatalf("resumed on a: %v after %d of %d events", err, len(got), len(want))
		}
		if f.HasID {
			ev, err := eventOf(f)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ev)
		}
	}
	st3.close()
	sameSequence(t, "the client's events, on b then on a", got, want)

	proxy.setCut(false)
	eventually(t, 20*time.Second, "b ready once it is back", func() bool {
		status, _, _, err := b.call(t.Context(), "GET", "/readyz", nil)
		return err == nil && status == http.StatusOK
	})
	eventually(t, 20*time.Second, "a stream on b once it is back", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		st, err := b.openStream(ctx, "/v1/threads/t1/events?after="+cursor, "")
		if err != nil {
			return false
		}
		defer st.close()
		var evs []seenEvent
		for len(evs) < len(want) {
			f, err := st.next()
			if err != nil || f.Event == "reconnect" {
				return false
			}
			if f.HasID {
				ev, err := eventOf(f)
				if err != nil {
					return false
				}
				evs = append(evs, ev)
			}
		}
		sameSequence(t, "b's stream once it is back", evs, want)
		return true
	})
}

// TestDeleteUnheardAfterLongCutOff: node b is cut off from NATS while a
// thread it holds in memory is deleted through node a, and stays cut off
// until the deletion's tombstone has left the log (its TTL is 2s here, a
// day by default), so b cannot hear of it. Once b follows the log again
// it answers 404 for the thread, as a does: after a cut-off that long it
// forgets the threads it held and loads them from the store again. It
// served the deleted thread from memory.
func TestDeleteUnheardAfterLongCutOff(t *testing.T) {
	srv := natstest.StartServer(t)
	js := &jetStream{srvs: []*server.Server{srv}, urls: srv.ClientURL()}
	o := nodeOptions{Replicas: 1, StoreTimeout: 2 * time.Second, TombstoneTTL: 2 * time.Second}
	a := startNode(t, js, "a", o)
	proxy := startCutProxy(t, strings.TrimPrefix(srv.ClientURL(), "nats://"))
	o.URL = "nats://" + proxy.addr
	b := startNode(t, js, "b", o)

	a.createThread(t, "t1")
	b.mustCall(t, "GET", "/v1/threads/t1", nil, http.StatusOK, nil) // b holds t1
	proxy.setCut(true)
	eventually(t, 30*time.Second, "node b to stop following the log", func() bool { return !b.e.Following() })
	a.mustCall(t, "DELETE", "/v1/threads/t1", nil, http.StatusNoContent, nil)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	jsc, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, _ := names(t)
	eventually(t, 30*time.Second, "the log to be empty (the tombstone expired)", func() bool {
		s, err := jsc.Stream(t.Context(), stream)
		if err != nil {
			return false
		}
		info, err := s.Info(t.Context())
		return err == nil && info.State.Msgs == 0
	})
	proxy.setCut(false)
	eventually(t, 30*time.Second, "node b to follow the log again", b.e.Following)
	status, body, _, err := b.call(t.Context(), "GET", "/v1/threads/t1", nil)
	if err != nil || status != http.StatusNotFound {
		t.Fatalf("node b answers %d %v for the thread deleted while it was cut off: %.200s", status, err, body)
	}
}
