package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/tetherhq/tether/store"
)

// testAgentRegistry: declared agent names are kept, listed, removed, and
// survive a reopen (a store without the registry skips this).
func testAgentRegistry(t *testing.T, s *suite) {
	dir := t.TempDir()
	st := s.open(t, dir)
	reg, ok := st.(store.AgentRegistry)
	if !ok {
		t.Skip("the store keeps no declared agents")
	}
	if _, err := reg.DeclaredAgent(ctx, "mine"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("undeclared: %v, want ErrNotFound", err)
	}
	at := time.UnixMilli(time.Now().UnixMilli()).UTC()
	for i, want := range []bool{true, false} {
		created, err := reg.DeclareAgent(ctx, "mine", at.Add(time.Duration(i)*time.Hour))
		if err != nil || created != want {
			t.Fatalf("declare #%d: created %v, %v; want %v", i+1, created, err, want)
		}
	}
	if _, err := reg.DeclareAgent(ctx, "other.agent-2", at); err != nil {
		t.Fatal(err)
	}
	got, err := reg.DeclaredAgent(ctx, "mine")
	if err != nil || !got.Equal(at) {
		t.Fatalf("declared at %v, %v; want %v (the first declaration)", got, err, at)
	}
	if err := reg.RemoveAgent(ctx, "other.agent-2"); err != nil {
		t.Fatal(err)
	}
	if err := reg.RemoveAgent(ctx, "other.agent-2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("remove twice: %v, want ErrNotFound", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	reg = s.open(t, dir).(store.AgentRegistry)
	all, err := reg.DeclaredAgents(ctx)
	if err != nil || len(all) != 1 || !all["mine"].Equal(at) {
		t.Fatalf("after a reopen: %v, %v; want only mine at %v", all, err, at)
	}
	if _, err := reg.DeclareAgent(ctx, "other.agent-2", at); err != nil { // removed names can come back
		t.Fatal(err)
	}
	if all, _ := reg.DeclaredAgents(ctx); len(all) != 2 {
		t.Fatalf("declared again: %v", all)
	}
}
