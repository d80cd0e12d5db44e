package engine_test

import (
	"testing"

	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// The runs of in-process agents wait in one line, oldest first whatever
// their agent, and each knows its place in it: a burst of one agent's runs
// must not overtake another agent's earlier run behind the same runner,
// and a run's queue position must be the order in which claims take runs.
func TestQueueLineAcrossAgents(t *testing.T) {
	e := newEngine(t, testutil.OpenStore(t, ""), engine.Options{
		AcceptAgent: func(string) bool { return true }, InProcess: []string{"a", "b"},
	})
	type queued struct{ agent, id string }
	var line []queued
	for i, agent := range []string{"b", "a", "b", "a", "x"} {
		tid := "t" + string(rune('0'+i))
		mustThread(t, e, tid)
		line = append(line, queued{agent, mustRun(t, e, tid, engine.RunRequest{Agent: agent}).ID})
	}
	// x is not in-process: a line of its own.
	want := []int{1, 2, 3, 4, 1}
	for i, q := range line {
		if got := e.QueuePosition(q.agent, q.id); got != want[i] {
			t.Errorf("run %d (%s): position %d, want %d", i, q.agent, got, want[i])
		}
	}
	if n := e.QueuedRuns(); n != 5 {
		t.Errorf("QueuedRuns = %d, want 5", n)
	}
	for i, q := range line[:4] {
		c, err := e.Claim(ctxT(t), engine.ClaimRequest{WorkerID: "w", Agents: []string{"a", "b"}, Local: true})
		if err != nil || c == nil {
			t.Fatalf("claim %d: %v %v", i, c, err)
		}
		if c.Run.ID != q.id {
			t.Fatalf("claim %d took %s (%s), want %s (%s): not first in, first out", i, c.Run.ID, c.Run.Agent, q.id, q.agent)
		}
		if got := e.QueuePosition(q.agent, q.id); got != 0 {
			t.Errorf("a claimed run has position %d", got)
		}
		for j, r := range line[i+1 : 4] {
			if got := e.QueuePosition(r.agent, r.id); got != j+1 {
				t.Errorf("after %d claims run %d: position %d, want %d", i+1, i+1+j, got, j+1)
			}
		}
	}
}
