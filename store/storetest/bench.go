package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// BenchCommit measures ingest on s, for the stores' BenchmarkCommit: one
// goroutine per thread commits batches of events back to back (the engine
// keeps one batch per thread in flight), so with many threads a store can
// share its work (a transaction, an fsync, a round trip) among them. b.N
// counts batches; events/s is the figure to watch, µs/commit the time one
// thread waits for each. With producer, each batch also carries the new
// state of its thread's one idempotent producer, as a worker's and an
// in-process run's appends do.
func BenchCommit(b *testing.B, s store.Store, threads, events int, producer bool) {
	// What the hub would do: look at the records, nothing more.
	var notified atomic.Int64
	s.SetNotify(func(c *store.Committed) { notified.Add(int64(len(c.Records))) })

	ctx := context.Background()
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
			var prods []store.Producer
			if producer {
				prods = []store.Producer{{Key: ev.RunID + "/wrk_" + id, Epoch: 1}}
			}
			for next.Add(1) <= int64(b.N) {
				if producer {
					prods[0].Seq++
				}
				// As the engine does: every batch with events moves the row's
				// updated_at (and so its place in the listing indexes).
				row.UpdatedAt = tether.Now()
				res, err := s.Commit(ctx, &store.Batch{ThreadID: id, Version: version, Events: evs, Encoded: encs, Thread: &row, Producers: prods})
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
