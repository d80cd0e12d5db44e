package engine_test

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/hub"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/sqlitestore"
)

// pageBudget is the bytes a catch-up page holds at most by default
// (hub.Options.HistoryBytes), but for a single record larger than that.
const pageBudget = 1 << 20

// readCounter records the bytes each read of the log returns.
type readCounter struct {
	store.Store
	mu    sync.Mutex
	reads []int
}

func (c *readCounter) note(recs []*tether.Record) {
	n := 0
	for _, r := range recs {
		n += r.Size()
	}
	c.mu.Lock()
	c.reads = append(c.reads, n)
	c.mu.Unlock()
}

func (c *readCounter) ReadEvents(ctx context.Context, id string, after tether.Offset, limit int) ([]*tether.Record, error) {
	recs, err := c.Store.ReadEvents(ctx, id, after, limit)
	c.note(recs)
	return recs, err
}

func (c *readCounter) ReadPage(ctx context.Context, id string, after tether.Offset, limit, maxBytes int) ([]*tether.Record, bool, error) {
	recs, more, err := c.Store.ReadPage(ctx, id, after, limit, maxBytes)
	c.note(recs)
	return recs, more, err
}

// A subscriber that catches up over large events reads and holds the log a
// page of about HistoryBytes at a time, not 512 events at a time (512 events
// of 900 KB held 460 MB for one stalled stream), and still gets every event
// once, in order, with no gap where a page was cut.
func TestCatchUpPagesAreBoundedInBytes(t *testing.T) {
	st := &readCounter{Store: testutil.OpenStore(t, "")}
	e := newEngine(t, st, engine.Options{})
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	mustRun(t, e, "t1", engine.RunRequest{})
	c := mustClaim(t, e, "echo")
	mustAppend(t, e, c, &tether.Event{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant})
	big := strings.Repeat("x", 512<<10)
	for range 40 {
		mustAppend(t, e, c, &tether.Event{Type: tether.EventTextDelta, MessageID: "m1", Delta: big})
	}
	var want []*tether.Record
	for from, more := tether.OffsetStart, true; more; {
		var recs []*tether.Record
		var err error
		if recs, more, err = e.ReadLog(ctx, "t1", from, 1000); err != nil {
			t.Fatal(err)
		}
		want = append(want, recs...)
		if len(recs) > 0 {
			from = recs[len(recs)-1].Offset
		}
	}
	st.mu.Lock()
	st.reads = nil
	st.mu.Unlock()

	sub, err := e.Subscribe(ctx, engine.SubscribeRequest{ThreadID: "t1", Cursor: tether.OffsetStart})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []tether.Offset
	pages := 0
	for len(got) < len(want) {
		recs, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("Next after %d records: %v", len(got), err)
		}
		pages++
		n := 0
		for _, r := range recs {
			n += r.Size()
			got = append(got, r.Offset)
		}
		if n > pageBudget && len(recs) > 1 {
			t.Fatalf("page %d holds %d records, %d bytes: over the %d byte budget", pages, len(recs), n, pageBudget)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i].Offset {
			t.Fatalf("record %d: got %s, want %s", i, got[i], want[i].Offset)
		}
	}
	st.mu.Lock()
	reads := st.reads
	st.mu.Unlock()
	if len(reads) == 0 {
		t.Fatal("the catch-up read nothing from the store")
	}
	for i, n := range reads {
		if n > pageBudget+(1<<20) { // the budget, and at most one record past it
			t.Fatalf("store read %d returned %d bytes", i, n)
		}
	}
}

// BenchmarkStalledCatchUp measures what K streams that catch up over large
// events hold while stalled: each reads its first page from the start of a
// log of 40 events of 900 KB and keeps it, as a writer blocked on a client
// that reads nothing does. MB/stream is the Go heap they hold, each, after
// a GC. history-bytes=unbounded sets HistoryBytes past any page, which is
// how pages were read before it existed (512 events, whatever their size).
func BenchmarkStalledCatchUp(b *testing.B) {
	const streams = 3
	for _, tc := range []struct {
		name  string
		bytes int
	}{{"history-bytes=1MiB", 0}, {"history-bytes=unbounded", 1 << 40}} {
		b.Run(tc.name, func(b *testing.B) {
			st, err := sqlitestore.Open(filepath.Join(b.TempDir(), "tether.db"), sqlitestore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			e := engine.New(st, engine.Options{Hub: hub.Options{HistoryBytes: tc.bytes}})
			defer e.Close()
			ctx := context.Background()
			if err := e.Start(ctx); err != nil {
				b.Fatal(err)
			}
			if _, _, err := e.CreateThread(ctx, "t1", nil); err != nil {
				b.Fatal(err)
			}
			if _, err := e.CreateRun(ctx, "t1", engine.RunRequest{Agent: "echo"}); err != nil {
				b.Fatal(err)
			}
			c, err := e.Claim(ctx, engine.ClaimRequest{WorkerID: "w1", Agents: []string{"echo"}, Wait: time.Second})
			if err != nil || c == nil {
				b.Fatalf("claim: %v, %v", c, err)
			}
			evs := []*tether.Event{{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant}}
			for range 40 {
				evs = append(evs, &tether.Event{Type: tether.EventTextDelta, MessageID: "m1", Delta: strings.Repeat("x", 900_000)})
			}
			for _, ev := range evs {
				if _, err := e.Append(ctx, c.Run.ID, c.Lease.Token, []*tether.Event{ev}); err != nil {
					b.Fatal(err)
				}
			}
			var held float64
			b.ResetTimer()
			for range b.N {
				var m0, m1 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&m0)
				subs := make([]*engine.Subscription, streams)
				pages := make([][]*tether.Record, streams)
				for i := range subs {
					if subs[i], err = e.Subscribe(ctx, engine.SubscribeRequest{ThreadID: "t1", Cursor: tether.OffsetStart}); err != nil {
						b.Fatal(err)
					}
					if pages[i], err = subs[i].Next(ctx); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&m1)
				held += float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / streams
				for i := range subs {
					runtime.KeepAlive(pages[i])
					subs[i].Close()
				}
			}
			b.ReportMetric(held/float64(b.N)/1e6, "MB/stream")
		})
	}
}
