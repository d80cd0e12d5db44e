package main

import (
	"strings"
	"testing"

	"github.com/tetherhq/tether/internal/testutil"
)

// TestSoak runs a short soak, as CI does: the real binary, built here,
// killed with SIGKILL a few times under load. It fails on any violation,
// with the soak's report.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak builds and kills the real binary")
	}
	var out testutil.SyncBuffer
	err := run(t.Context(), []string{"-rounds", "8", "-max-up", "1500ms", "-seed", "1"}, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "PASS") {
		t.Fatal("the soak did not report its result")
	}
}
