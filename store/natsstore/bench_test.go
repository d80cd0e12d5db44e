package natsstore_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/natsstore"
	"github.com/tetherhq/tether/store/natsstore/natstest"
)

// BenchmarkCommit measures ingest, as sqlitestore's benchmark of the same
// name does: one goroutine per thread commits batches back to back (the
// engine keeps one batch per thread in flight), so with many threads many
// publishes are in flight together. b.N counts batches; events/s is the
// figure to watch. deploy=r3 is a three-server cluster, stream and bucket
// replicated three times, all on this machine.
func BenchmarkCommit(b *testing.B) {
	for _, deploy := range []string{"single", "r3"} {
		b.Run("deploy="+deploy, func(b *testing.B) {
			var opts natsstore.Options
			if deploy == "single" {
				opts = optionsFor(natstest.StartServer(b).ClientURL(), "", 1)
			} else {
				opts = optionsFor(natstest.URLs(natstest.StartCluster(b, 3)...), "", 3)
			}
			for _, threads := range []int{1, 100} {
				for _, events := range []int{1, 10} {
					b.Run(fmt.Sprintf("threads=%d/events=%d", threads, events), func(b *testing.B) {
						benchCommit(b, opts, threads, events)
					})
				}
			}
		})
	}
}

// benchStreams numbers the streams of the benchmarks, one per run.
var benchStreams atomic.Int64

func benchCommit(b *testing.B, opts natsstore.Options, threads, events int) {
	n := benchStreams.Add(1)
	opts.Stream, opts.Subject = fmt.Sprintf("%s_%d", opts.Stream, n), fmt.Sprintf("b%d.log", n)
	s := openStore(b, opts)
	defer s.Close()
	// What the hub would do: look at the records, nothing more.
	var notified atomic.Int64
	s.SetNotify(func(c *store.Committed) { notified.Add(int64(len(c.Records))) })

	now := tether.Now()
	for i := range threads {
		id := fmt.Sprintf("thread-%03d", i)
		if _, err := s.Commit(ctx, &store.Batch{ThreadID: id, Create: true,
			Thread: &tether.Thread{ID: id, Status: tether.ThreadBusy, CreatedAt: now, UpdatedAt: now}}); err != nil {
			b.Fatal(err)
		}
	}
	// A typical streamed token: a text.delta of a few bytes.
	ev := tether.Event{Type: tether.EventTextDelta, TS: now, RunID: "run_01jd8m1c6q4m0z5r6x7y8z9a0b",
		MessageID: "msg_01jd8m1c6q4m0z5r6x7y8z9a0b", Delta: "Hello, world", Metadata: json.RawMessage(`{"i":1}`)}
	enc, err := ev.Encode()
	if err != nil {
		b.Fatal(err)
	}

	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range threads {
		id := fmt.Sprintf("thread-%03d", i)
		wg.Go(func() {
			evs := make([]*tether.Event, events)
			encs := make([][]byte, events)
			for j := range evs {
				e := ev
				evs[j], encs[j] = &e, enc
			}
			version := int64(0)
			row := tether.Thread{ID: id, Status: tether.ThreadBusy, CreatedAt: now, ActiveRunID: ev.RunID}
			for next.Add(1) <= int64(b.N) {
				// As the engine does: every batch with events moves the row's
				// updated_at.
				row.UpdatedAt = tether.Now()
				res, err := s.Commit(ctx, &store.Batch{ThreadID: id, Version: version, Events: evs, Encoded: encs, Thread: &row})
				if err != nil {
					b.Error(err)
					return
				}
				version = res.Version
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N*events)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N)*float64(threads), "µs/commit")
	if got := notified.Load(); got != int64(b.N*events) {
		b.Fatalf("notified %d events, want %d", got, b.N*events)
	}
}
