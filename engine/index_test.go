package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/testutil"
)

// The run → thread index holds the runs of the threads in memory only: it
// grew by one entry per run for the life of the process, also for threads
// long evicted. A run of an evicted thread is still found (through the
// store), and a deleted thread's runs leave it.
func TestRunIndexFollowsThreadsInMemory(t *testing.T) {
	st := testutil.OpenStore(t, "")
	e := New(st, Options{MaxThreads: 2, AcceptAgent: func(string) bool { return true }})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var runIDs []string
	for i := range 6 {
		id := fmt.Sprintf("t%d", i)
		if _, _, err := e.CreateThread(ctx, id, nil); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			rc, err := e.CreateRun(ctx, id, RunRequest{Agent: "echo", Multitask: tether.MultitaskEnqueue})
			if err != nil {
				t.Fatal(err)
			}
			runIDs = append(runIDs, rc.Run.ID)
		}
	}
	indexed := func() (runs, threads int) {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.runs), len(e.threads)
	}
	if n, th := indexed(); n > 3*th {
		t.Fatalf("%d runs indexed for %d threads in memory (3 runs each)", n, th)
	}
	// Every run is still found, whichever thread is in memory.
	for _, id := range runIDs {
		if _, err := e.Run(ctx, id); err != nil {
			t.Fatalf("run %s: %v", id, err)
		}
	}
	if n, th := indexed(); n > 3*th {
		t.Fatalf("after reading every run: %d runs indexed for %d threads in memory", n, th)
	}
	if err := e.DeleteThread(ctx, "t5"); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	for id, tid := range e.runs {
		if tid == "t5" {
			t.Errorf("run %s of the deleted thread is still indexed", id)
		}
	}
	e.mu.Unlock()
}
