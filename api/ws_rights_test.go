package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// A subscribe whose rights are checked in the store (a worker's run, a
// user's thread: both looked up there when the node has not loaded them)
// is refused unavailable when the store does not answer within
// SubscribeTimeout, as the subscribe itself is: the check waited on the
// store for as long as it took, and left the client without an answer,
// its pings and unsubscribes too, since a socket's frames are handled one
// after another.
func TestWSRightsCheckStoreNeverAnswers(t *testing.T) {
	const workerTok = "worker-token-0123456789"
	st := testutil.OpenStore(t, "")
	w1 := engine.New(st, engine.Options{AcceptAgent: func(string) bool { return true }})
	if err := w1.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w1.CreateThread(t.Context(), "cold", nil); err != nil {
		t.Fatal(err)
	}
	rc, err := w1.CreateRun(t.Context(), "cold", engine.RunRequest{Agent: "ext"})
	if err != nil {
		t.Fatal(err)
	}
	w1.Close()
	h := &storeHeld{Store: st, reading: make(chan struct{}, 1), gaveUp: make(chan struct{}, 1)}
	t.Cleanup(h.release)
	v := newEnvStore(t, h, api.Options{SubscribeTimeout: 50 * time.Millisecond,
		Keys: []api.Key{{Token: workerTok, Role: api.RoleWorker}}}, engine.Options{})

	w := v.ws("", "Authorization", "Bearer "+workerTok)
	h.hold()
	w.subscribe("a", "run_id", rc.Run.ID, "after", "-1")
	if m := w.expect("error", "a"); m.Error.Code != "unavailable" || m.Error.Message == "" {
		t.Fatalf("subscribe while the store does not answer: %s", m.raw)
	}
	w.send(`{"op":"ping","id":"p"}`)
	w.expect("pong", "p")
	// Once the store answers, the same subscribe is checked: this worker
	// never held the run.
	h.release()
	w.subscribe("a", "run_id", rc.Run.ID, "after", "-1")
	if m := w.expect("error", "a"); m.Error.Code != "forbidden" {
		t.Fatalf("subscribe once the store answers: %s", m.raw)
	}
}
