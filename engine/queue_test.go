package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store/natsstore"
	"github.com/tetherhq/tether/store/natsstore/natstest"
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

// A deleted thread's pending runs leave the line at once, on the node
// that deleted it and on the others sharing the store: they will never
// start, so the runs behind them move up and they are no longer counted
// as queued (tether_runs_queued).
func TestQueueLeftByDeletedThread(t *testing.T) {
	url := natstest.StartServer(t).ClientURL()
	es := make([]*engine.Engine, 2)
	for i := range es {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ns, err := natsstore.Open(ctx, natsstore.Options{URL: url, Node: fmt.Sprint("node-", i), Logger: slog.New(slog.DiscardHandler)})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Close() })
		es[i] = newEngine(t, ns, engine.Options{NodeID: fmt.Sprint("node-", i)})
	}
	a, b := es[0], es[1]
	var runs []string
	for _, tid := range []string{"t0", "t1", "t2"} {
		mustThread(t, a, tid)
		runs = append(runs, mustRun(t, a, tid, engine.RunRequest{Input: userInput("hi")}).ID)
	}
	for i, e := range es {
		testutil.Eventually(t, 5*time.Second, "every run queued on every node", func() bool { return e.QueuedRuns() == 3 })
		if got := e.QueuePosition("echo", runs[2]); got != 3 {
			t.Fatalf("node %d: position %d before the delete, want 3", i, got)
		}
	}
	if err := b.DeleteThread(ctxT(t), "t0"); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteThread(ctxT(t), "t1"); err != nil {
		t.Fatal(err)
	}
	for i, e := range es {
		testutil.Eventually(t, 5*time.Second, "the deleted threads' runs out of line", func() bool { return e.QueuedRuns() == 1 })
		if got := e.QueuePosition("echo", runs[2]); got != 1 {
			t.Errorf("node %d: position %d after the deletes, want 1", i, got)
		}
	}
	// A thread made again with a deleted one's ID queues its runs anew.
	mustThread(t, a, "t0")
	again := mustRun(t, a, "t0", engine.RunRequest{Input: userInput("hi")}).ID
	for i, e := range es {
		testutil.Eventually(t, 5*time.Second, "the new run queued", func() bool { return e.QueuedRuns() == 2 })
		if got := e.QueuePosition("echo", again); got != 2 {
			t.Errorf("node %d: the new run's position %d, want 2", i, got)
		}
	}
}

// A run claimed through one node leaves the line on every node: the
// others queued it when they heard of its creation, and it stayed there,
// ahead of the runs behind it and counted as queued, until it finished
// or a claim on that node skipped it.
func TestQueueLeftByRunStartedElsewhere(t *testing.T) {
	es, _ := cluster(t, 2, engine.Options{})
	a, b := es[0], es[1]
	var runs []string
	for _, tid := range []string{"t0", "t1", "t2"} {
		mustThread(t, a, tid)
		runs = append(runs, mustRun(t, a, tid, engine.RunRequest{Input: userInput("hi")}).ID)
	}
	testutil.Eventually(t, 5*time.Second, "every run queued on b", func() bool { return b.QueuedRuns() == 3 })
	if c := mustClaim(t, a, "echo"); c.Run.ID != runs[0] {
		t.Fatalf("claimed %s, want %s", c.Run.ID, runs[0])
	}
	for i, e := range es {
		testutil.Eventually(t, 5*time.Second, "the claimed run out of line", func() bool { return e.QueuedRuns() == 2 })
		for j, id := range runs[1:] {
			if got := e.QueuePosition("echo", id); got != j+1 {
				t.Errorf("node %d: run %d at position %d, want %d", i, j+1, got, j+1)
			}
		}
	}
}
