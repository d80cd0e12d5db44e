package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// An unsubscribe of an open subscription is answered by its end
// (unsubscribed), also when the subscription reaches its own end at the
// same moment: the run's run.finished, committed just before. The
// subscription's goroutine could pass its look for the unsubscribe, then
// queue its end run_finished, while the unsubscribe waited for it: the
// client got no answer to its unsubscribe (neither end unsubscribed nor
// not_found, which an unsubscribe after the end gets).
func TestWSUnsubscribeRacesRunEnd(t *testing.T) {
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	w := v.ws("")
	const subs = 32
	for round := range 30 {
		tid := fmt.Sprintf("t%d", round)
		v.thread(tid)
		run, lease := v.extRun(tid)
		ids := make([]string, subs)
		for i := range ids {
			ids[i] = fmt.Sprintf("r%d-%d", round, i)
			w.subscribe(ids[i], "run_id", run, "after", "now", "types", []string{"text.delta"})
			w.expect("subscribed", ids[i])
		}
		// Events the subscriptions skip, then the run's end: each
		// subscription looks through them all before it finds its end.
		batch := strings.Repeat(`{"type":"custom","name":"tick"},`, 500) + `{"type":"run.finished","status":"done"}`
		v.mustDo(200, "POST", "/v1/runs/"+run+"/events", "["+batch+"]", lease...)
		for _, id := range ids {
			w.send(map[string]any{"op": "unsubscribe", "id": id})
		}
		w.send(`{"op":"ping","id":"sync"}`)
		// Every unsubscribe is answered before the next client frame is
		// read: by the end unsubscribed, or by not_found after the
		// subscription's own end.
		ends := map[string]string{}
		answered := map[string]bool{}
		for synced := false; !synced; {
			m := w.read()
			switch {
			case m.Op == "pong" && m.ID == "sync":
				synced = true
			case m.Op == "end":
				if ends[m.ID] != "" {
					t.Fatalf("round %d: a second end: %s", round, m.raw)
				}
				ends[m.ID] = m.Reason
				answered[m.ID] = m.Reason == "unsubscribed"
			case m.Op == "error" && m.Error.Code == "not_found":
				if ends[m.ID] != "run_finished" || answered[m.ID] {
					t.Fatalf("round %d: %s after end %q", round, m.raw, ends[m.ID])
				}
				answered[m.ID] = true
			default:
				t.Fatalf("round %d: frame %s", round, m.raw)
			}
		}
		for _, id := range ids {
			if !answered[id] {
				t.Fatalf("round %d: the unsubscribe of %s was not answered (its end: %q)", round, id, ends[id])
			}
		}
	}
}

// An unsubscribe is answered while the subscription waits on the store
// (its catch-up reads a page of the log, and the store does not answer):
// the read is given up. The unsubscribe waited for the read, the socket's
// reader with it, so that no later frame was answered, nor the server's
// control pings read back, and the socket was cut a write timeout later
// without an end.
func TestWSUnsubscribeWhileReadWaitsOnStore(t *testing.T) {
	_, w, frames, _ := heldCatchUp(t)
	w.send(`{"op":"unsubscribe","id":"a"}`)
	w.send(`{"op":"ping","id":"p"}`)
	var end wsMsg
	for m := range frames {
		switch {
		case m.Op == "end":
			end = m
		case m.Op == "pong" && m.ID == "p":
			if end.Reason != "unsubscribed" || end.Offset == "" {
				t.Fatalf("pong before the end unsubscribed (end: %q)", end.raw)
			}
			return
		case m.Op != "event":
			t.Fatalf("frame %s", m.raw)
		}
	}
	t.Fatalf("the socket closed without answering the unsubscribe (end: %q)", end.raw)
}

// At shutdown, a subscription whose read of the log waits on the store
// gets its end (shutdown, with its offset) and the socket its close
// (1001): the read is given up. Shutdown waited for the read.
func TestWSShutdownWhileReadWaitsOnStore(t *testing.T) {
	v, _, frames, closed := heldCatchUp(t)
	go v.srv.Shutdown()
	var end wsMsg
	for m := range frames {
		switch {
		case m.Op == "end":
			end = m
		case m.Op != "event":
			t.Fatalf("frame %s", m.raw)
		}
	}
	if end.Reason != "shutdown" || end.Offset == "" {
		t.Fatalf("end %q, want shutdown with an offset", end.raw)
	}
	if err := <-closed; websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("closed with %v, want 1001", err)
	}
}

// heldCatchUp opens a socket with a subscription "a" that catches up on a
// long thread from the store, and returns once its first read of the
// log waits on the store, which does not answer
// until the test ends. The socket's frames come on frames, read meanwhile
// (the server's pings answered); then the error that ended it on closed.
func heldCatchUp(t *testing.T) (*env, *wsClient, <-chan wsMsg, <-chan error) {
	t.Helper()
	t.Cleanup(api.SetWSQueueBytes(1 << 10))
	h := &storeHeld{Store: testutil.OpenStore(t, ""), reading: make(chan struct{}, 1), gaveUp: make(chan struct{}, 1)}
	t.Cleanup(h.release)
	v := newEnvStore(t, h, api.Options{}, catchUpEngine())
	v.longThread("t1", 200)
	w := v.ws("")
	// Held before the subscribe: once the catch-up began, the server could
	// write all of the thread into the socket's buffers before a hold.
	h.hold()
	w.subscribe("a", "thread_id", "t1", "after", "-1")
	w.expect("subscribed", "a")
	frames := make(chan wsMsg, 1024)
	closed := make(chan error, 1)
	go func() {
		defer close(frames)
		for {
			m, err := w.next()
			if err != nil {
				closed <- err
				return
			}
			frames <- m
		}
	}()
	<-h.reading
	return v, w, frames, closed
}
