package engine

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/testutil"
)

// DropIdle (the trim of a server gone quiet) drops the states of the
// threads with no run in progress and keeps the others; a dropped thread
// reads back the same from the store.
func TestDropIdle(t *testing.T) {
	st := testutil.OpenStore(t, "")
	e := New(st, Options{AcceptAgent: func(string) bool { return true }})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, id := range []string{"idle", "busy", "ended"} {
		if _, _, err := e.CreateThread(ctx, id, json.RawMessage(`{"title":"`+id+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.CreateRun(ctx, "busy", RunRequest{Agent: "ext"}); err != nil {
		t.Fatal(err)
	}
	rc, err := e.CreateRun(ctx, "ended", RunRequest{Agent: "ext"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.CancelRun(ctx, rc.Run.ID); err != nil {
		t.Fatal(err)
	}
	before := map[string][]byte{}
	for _, id := range []string{"idle", "ended"} {
		snap, err := e.Thread(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		before[id], _ = json.Marshal(snap)
	}

	if n := e.DropIdle(); n != 2 {
		t.Fatalf("DropIdle dropped %d threads, want 2 (idle, ended)", n)
	}
	if e.cached("busy") == nil {
		t.Fatal("the thread with a run in progress was dropped")
	}
	for _, id := range []string{"idle", "ended"} {
		if e.cached(id) != nil {
			t.Fatalf("thread %s still in memory", id)
		}
		snap, err := e.Thread(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if after, _ := json.Marshal(snap); string(after) != string(before[id]) {
			t.Fatalf("thread %s after the drop:\n%s\nbefore:\n%s", id, after, before[id])
		}
	}
	// The run in progress goes on.
	if _, err := e.CancelRun(ctx, mustActive(t, e, "busy")); err != nil {
		t.Fatal(err)
	}
	if snap, _ := e.Thread(ctx, "busy"); snap.Thread.Status != tether.ThreadIdle {
		t.Fatalf("busy thread after its run's cancel: %s", snap.Thread.Status)
	}
}

func mustActive(t *testing.T, e *Engine, id string) string {
	t.Helper()
	snap, err := e.Thread(context.Background(), id)
	if err != nil || snap.Thread.ActiveRunID == "" {
		t.Fatalf("thread %s: no active run (%v)", id, err)
	}
	return snap.Thread.ActiveRunID
}
