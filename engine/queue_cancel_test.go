package engine_test

import (
	"testing"

	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// A cancelled pending run leaves the line at once (operations.md,
// "In-process runs"): the runs behind it move up, and it is no longer
// counted as queued.
func TestCancelledPendingRunLeavesTheLine(t *testing.T) {
	e := newEngine(t, testutil.OpenStore(t, ""), engine.Options{
		AcceptAgent: func(string) bool { return true }, InProcess: []string{"a"},
	})
	var ids []string
	for i := range 3 {
		tid := "t" + string(rune('0'+i))
		mustThread(t, e, tid)
		ids = append(ids, mustRun(t, e, tid, engine.RunRequest{Agent: "a"}).ID)
	}
	if _, err := e.CancelRun(ctxT(t), ids[0]); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids[1:] {
		if got := e.QueuePosition("a", id); got != i+1 {
			t.Errorf("run %d: position %d, want %d", i+1, got, i+1)
		}
	}
	if n := e.QueuedRuns(); n != 2 {
		t.Errorf("QueuedRuns = %d, want 2", n)
	}
}
