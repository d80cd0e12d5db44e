package api

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/tetherhq/tether/internal/testutil"
)

// TestAside: f runs on another goroutine and aside returns once it has; a
// panic in f ends f alone, reported and logged with its stack, as net/http
// does for a handler.
func TestAside(t *testing.T) {
	var logs testutil.SyncBuffer
	s := &Server{log: slog.New(slog.NewTextHandler(&logs, nil))}
	ran := false
	if !s.aside(func() { ran = true }) || !ran {
		t.Fatalf("aside of a function that returns: ran %v", ran)
	}
	if s.aside(func() { panic("a bug one client reached") }) {
		t.Fatal("aside of a function that panics reported that it returned")
	}
	if l := logs.String(); !strings.Contains(l, "a bug one client reached") || !strings.Contains(l, "stack_test.go") {
		t.Fatalf("the panic is not logged with its stack:\n%s", l)
	}
}
