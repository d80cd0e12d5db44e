package natsstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/natsstore/natstest"
)

// The agent directory is shared by every handle on the store: a name one
// node records is seen by another, with the latest time.
func TestAgentDirectory(t *testing.T) {
	url := natstest.StartServer(t).ClientURL()
	opts := optionsFor(url, t.TempDir(), 1)
	a := openStore(t, opts)
	t.Cleanup(func() { a.Close() })
	opts.Node = "b"
	b := openStore(t, opts)
	t.Cleanup(func() { b.Close() })
	var dir store.AgentDirectory = a
	if _, err := b.AgentSeenAt(t.Context(), "echo"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an agent never seen: %v, want ErrNotFound", err)
	}
	t1 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := dir.SawAgents(t.Context(), []string{"echo", "a name with spaces/and.dots"}, t1); err != nil {
		t.Fatal(err)
	}
	if err := a.SawAgents(t.Context(), []string{"echo"}, t1.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]time.Time{"echo": t1.Add(time.Minute), "a name with spaces/and.dots": t1} {
		got, err := b.AgentSeenAt(t.Context(), name)
		if err != nil || !got.Equal(want) {
			t.Errorf("%q seen at %v %v, want %v", name, got, err, want)
		}
	}
}
