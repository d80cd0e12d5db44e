package api_test

import (
	"encoding/json"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
)

// TestSubscriptionSnapshotOwner: the snapshot a subscription starts with
// (SSE, WebSocket, a reset) holds the thread as GET /v1/threads/{tid}
// answers it, owner included, so that a client whose state is the snapshot
// and the events after it ends with exactly the server's state.
func TestSubscriptionSnapshotOwner(t *testing.T) {
	var c clock
	v := newTokenEnv(t, &c, api.Options{})
	alice := mint(t, nil, userClaims(&c, "alice", nil))
	v.mustDo(201, "POST", "/v1/threads", `{"id":"tOwn"}`, bearer(alice)...)
	var want tether.Snapshot
	v.mustDo(200, "GET", "/v1/threads/tOwn", nil, bearer(alice)...).json(&want)
	if want.Thread.Owner != "alice" {
		t.Fatalf("GET thread: owner %q, want alice", want.Thread.Owner)
	}

	s := v.sse("GET", "/v1/threads/tOwn/events", nil, "Authorization", "Bearer "+alice)
	for {
		f, err := s.next()
		if err != nil {
			t.Fatal("SSE: no snapshot")
		}
		if f.event != "snapshot" {
			continue
		}
		var snap tether.Snapshot
		if err := json.Unmarshal([]byte(f.data), &snap); err != nil {
			t.Fatal(err)
		}
		if snap.Thread.Owner != "alice" {
			t.Errorf("SSE snapshot: owner %q, want alice", snap.Thread.Owner)
		}
		break
	}
	s.res.Body.Close()

	w, _ := v.wsAs(alice)
	if w == nil {
		t.Fatal("WebSocket refused")
	}
	defer w.c.CloseNow()
	for i, after := range []any{nil, "0000000001_0000000000000001"} { // a snapshot first; a reset
		id := []string{"first", "reset"}[i]
		if after == nil {
			w.subscribe(id, "thread_id", "tOwn")
		} else {
			w.subscribe(id, "thread_id", "tOwn", "after", after)
		}
		w.expect("subscribed", id)
		m := w.expect("snapshot", id)
		if m.Thread == nil || m.Thread.Owner != "alice" {
			t.Errorf("WebSocket snapshot (%s): %s, want owner alice", id, m.raw)
		}
	}
}
