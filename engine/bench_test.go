package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/store/sqlitestore"
)

// BenchmarkAppend measures durable ingest through the engine's one write
// path (validate, commit to a real SQLite file, publish), as workers drive
// it: many goroutines append batches of text.delta events to runs they
// hold. With one thread, 16 goroutines share it (the engine folds what
// queues up behind a commit into the next one); with 100 threads, one
// goroutine each. b.N counts appends; events/s is the figure to watch.
func BenchmarkAppend(b *testing.B) {
	for _, threads := range []int{1, 100} {
		for _, batch := range []int{1, 10} {
			for _, fsync := range []bool{false, true} {
				b.Run(fmt.Sprintf("threads=%d/batch=%d/fsync=%v", threads, batch, fsync), func(b *testing.B) {
					benchAppend(b, threads, max(threads, 16), batch, fsync)
				})
			}
		}
	}
}

func benchAppend(b *testing.B, threads, workers, batch int, fsync bool) {
	st, err := sqlitestore.Open(filepath.Join(b.TempDir(), "tether.db"), sqlitestore.Options{Fsync: fsync})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	e := engine.New(st, engine.Options{})
	defer e.Close()
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	runs := startBenchRuns(b, e, threads)

	// A typical streamed token.
	const delta = "lorem ipsum dolor sit amet, con"
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for w := range workers {
		c := runs[w%threads]
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				// The engine keeps the events it is given, as the API hands
				// it freshly decoded ones: new ones for every append.
				evs := make([]*tether.Event, batch)
				for i := range evs {
					evs[i] = &tether.Event{Type: tether.EventTextDelta, MessageID: "m1", Delta: delta}
				}
				if _, err := e.Append(ctx, c.Run.ID, c.Lease.Token, evs); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N*batch)/elapsed.Seconds(), "events/s")
}

// startBenchRuns creates n threads, each with a run of agent "bench" that
// it claims, with a message started for text.delta events.
func startBenchRuns(b *testing.B, e *engine.Engine, n int) []*engine.Claim {
	b.Helper()
	ctx := context.Background()
	ids := make(map[string]int, n)
	for i := range n {
		tid := fmt.Sprintf("thread-%03d", i)
		if _, _, err := e.CreateThread(ctx, tid, nil); err != nil {
			b.Fatal(err)
		}
		rc, err := e.CreateRun(ctx, tid, engine.RunRequest{Agent: "bench",
			Input: tether.RunInput{Messages: []tether.InputMessage{{Role: tether.RoleUser, Content: "go"}}}})
		if err != nil {
			b.Fatal(err)
		}
		ids[rc.Run.ID] = i
	}
	claims := make([]*engine.Claim, n)
	for range n {
		c, err := e.Claim(ctx, engine.ClaimRequest{WorkerID: "bench", Agents: []string{"bench"}, Wait: 5 * time.Second})
		if err != nil || c == nil {
			b.Fatalf("claim: %v, %v", c, err)
		}
		claims[ids[c.Run.ID]] = c
		_, err = e.Append(ctx, c.Run.ID, c.Lease.Token, []*tether.Event{{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant}})
		if err != nil {
			b.Fatal(err)
		}
	}
	return claims
}
