package api_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// BenchmarkFanout measures delivery over SSE: one thread of a real server
// (SQLite store, engine, HTTP) followed by 1, 100 or 1,000 subscribers,
// each drained by its own goroutine through net/http, while a worker
// appends batches of 10 text.delta events through the engine. The worker
// stays at most a window of events ahead of the slowest subscriber, so
// that no one is cut as a slow consumer: this measures delivery, not the
// cut. b.N counts appends; delivered-events/s (the sum over subscribers)
// is the figure to watch.
func BenchmarkFanout(b *testing.B) {
	for _, subs := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("subscribers=%d", subs), func(b *testing.B) { benchFanout(b, subs, 10) })
	}
}

func benchFanout(b *testing.B, subs, batch int) {
	const window = 1000 // events; well within the hub's per-subscriber buffer
	e, hs := benchServer(b, engine.Options{}, api.Options{})
	ctx := context.Background()
	tr := &http.Transport{MaxIdleConnsPerHost: 16, ReadBufferSize: 64 << 10, DisableCompression: true,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	defer tr.CloseIdleConnections()

	// A run held by the benchmark, with a message for the deltas.
	c := heldRun(ctx, b, e, "t")
	appendBatch := func() {
		evs := make([]*tether.Event, batch)
		for i := range evs {
			evs[i] = &tether.Event{Type: tether.EventTextDelta, MessageID: "m1", Delta: "lorem ipsum dolor sit amet, con"}
		}
		if _, err := e.Append(ctx, c.Run.ID, c.Lease.Token, evs); err != nil {
			b.Fatal(err)
		}
	}

	// The subscribers, from the tail; each counts what it gets.
	counts := make([]atomic.Int64, subs)
	var resumes atomic.Int64
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg, connected sync.WaitGroup
	connected.Add(subs)
	sem := make(chan struct{}, 32) // dials at once
	for i := range subs {
		sem <- struct{}{}
		wg.Go(func() {
			drainSSE(sctx, b, tr, hs.URL+"/v1/threads/t/events?after=now", &counts[i], &resumes, func() {
				<-sem
				connected.Done()
			})
		})
	}
	connected.Wait()
	slowest := func() int64 {
		m := counts[0].Load()
		for i := range counts {
			m = min(m, counts[i].Load())
		}
		return m
	}

	var appended int64
	start := time.Now()
	for b.Loop() {
		for appended-slowest() > window {
			time.Sleep(50 * time.Microsecond)
		}
		appendBatch()
		appended += int64(batch)
	}
	for slowest() < appended {
		time.Sleep(100 * time.Microsecond)
	}
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	b.ReportMetric(float64(appended)*float64(subs)/elapsed.Seconds(), "delivered-events/s")
	b.ReportMetric(float64(appended)/elapsed.Seconds(), "appended-events/s")
	b.ReportMetric(float64(resumes.Load()), "resumes")
}

// drainSSE follows an SSE stream, counting its events into n and resuming
// with Last-Event-ID when the server ends it, until ctx is done. ready is
// called once the first stream is open.
func drainSSE(ctx context.Context, b *testing.B, tr *http.Transport, url string, n, resumes *atomic.Int64, ready func()) {
	var last []byte
	once := sync.OnceFunc(ready)
	defer once()
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Accept", "text/event-stream")
		if last != nil {
			req.Header.Set("Last-Event-ID", string(last))
		}
		res, err := tr.RoundTrip(req)
		if err != nil {
			if ctx.Err() == nil {
				b.Error(err)
			}
			return
		}
		br := bufio.NewReaderSize(res.Body, 16<<10)
		var id []byte
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				break
			}
			switch {
			case bytes.HasPrefix(line, []byte("id: ")):
				id = append(id[:0], line[4:len(line)-1]...)
			case bytes.HasPrefix(line, []byte("event: connected")):
				once()
			case bytes.HasPrefix(line, []byte("event: reconnect")):
				resumes.Add(1)
			case len(line) == 1 && len(id) > 0: // the end of an event's frame
				last = append(last[:0], id...)
				id = id[:0]
				n.Add(1)
			}
		}
		res.Body.Close()
	}
}

// benchServer starts a real server for a benchmark (SQLite store, engine,
// HTTP), its logs discarded, shut down when the benchmark ends.
func benchServer(b *testing.B, eopts engine.Options, aopts api.Options) (*engine.Engine, *httptest.Server) {
	b.Helper()
	quiet := slog.New(slog.DiscardHandler)
	eopts.Logger, aopts.Logger = quiet, quiet
	e := engine.New(testutil.OpenStore(b, ""), eopts)
	if err := e.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	srv := api.New(e, aopts)
	hs := httptest.NewServer(srv.Handler())
	b.Cleanup(func() {
		srv.Shutdown()
		hs.Close()
		e.Close()
	})
	return e, hs
}

// heldRun creates thread tid with a run of agent "bench", claims it and
// starts its assistant message m1: a run a benchmark appends deltas to.
func heldRun(ctx context.Context, b *testing.B, e *engine.Engine, tid string) *engine.Claim {
	b.Helper()
	if _, _, err := e.CreateThread(ctx, tid, nil); err != nil {
		b.Fatal(err)
	}
	if _, err := e.CreateRun(ctx, tid, engine.RunRequest{Agent: "bench",
		Input: tether.RunInput{Messages: []tether.InputMessage{{Role: tether.RoleUser, Content: "go"}}}}); err != nil {
		b.Fatal(err)
	}
	c, err := e.Claim(ctx, engine.ClaimRequest{WorkerID: "bench", Agents: []string{"bench"}, Wait: 5 * time.Second})
	if err != nil || c == nil {
		b.Fatalf("claim: %v, %v", c, err)
	}
	if _, err := e.Append(ctx, c.Run.ID, c.Lease.Token, []*tether.Event{{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant}}); err != nil {
		b.Fatal(err)
	}
	return c
}
