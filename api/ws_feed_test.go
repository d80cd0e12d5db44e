package api_test

import (
	"errors"
	"testing"

	"github.com/coder/websocket"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// A WebSocket on a node that cannot follow the shared log: every
// subscription ends (error, with its offset), then the socket closes with
// 1013 (try again later), so that the client opens the next one on a node
// that follows the log; a socket opened meanwhile is closed so at once.
// Before, the subscriptions ended but the socket stayed, and the client
// subscribed again on the same node, refused each time.
func TestWebSocketClosedWhileNotFollowingTheLog(t *testing.T) {
	st := &feedStore{Store: testutil.OpenStore(t, "")}
	v := newEnvStore(t, st, api.Options{}, engine.Options{})
	v.mustDo(201, "POST", "/v1/threads", `{"id":"tA"}`)
	closed := func(w *wsClient, ends int) {
		t.Helper()
		ended := 0
		for n := 0; n < 100; n++ {
			m, err := w.next()
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				if ce.Code != websocket.StatusTryAgainLater || ce.Reason != "not_following_log" {
					t.Fatalf("closed with %v, want 1013 not_following_log", ce)
				}
				if ended != ends {
					t.Fatalf("%d end frames before the close, want %d", ended, ends)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Op == "end" {
				if m.Reason != "error" || m.Offset == "" {
					t.Fatalf("end frame %s, want error with an offset", m.raw)
				}
				ended++
			}
		}
		t.Fatal("the socket is still open")
	}
	w := v.ws("")
	w.subscribe("a", "thread_id", "tA", "after", "now")
	w.expect("subscribed", "a")
	st.notify(store.FeedState{})
	closed(w, 1)
	closed(v.ws(""), 0)
	st.notify(store.FeedState{Following: true})
	w = v.ws("")
	w.subscribe("b", "thread_id", "tA", "after", "now")
	w.expect("subscribed", "b")
}
