package api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
)

// BenchmarkLargeAppends measures the memory of N appends of 4 MiB bodies
// sent at once to a real server (SQLite store, engine, HTTP), each to a
// run of its own, with the budget of bodies in flight off, at its default
// (2 × 4 MiB) and at one body (4 MiB). Each iteration sends one wave of N.
// It reports the peak Go heap (runtime/metrics, sampled every millisecond) and the peak
// RSS of the process (VmHWM, reset before the wave), both above what they
// were before it; the bodies themselves (N × 4 MiB, built before) are the
// client's and count in neither.
//
// Bodies are 4 events of 1,000,000 bytes (the largest event is 1 MiB) or
// 4,000 events of 1,000 bytes: few large or many small, each body just
// under 4 MiB. retained-heap-MiB is the Go heap in use after the wave and
// a GC: what the server keeps of what was appended (each run's text in
// its state, the hub's recent events), not what was in flight.
//
//	go test ./api -run '^$' -bench LargeAppends -benchtime 3x
func BenchmarkLargeAppends(b *testing.B) {
	for _, shape := range []string{"4x1MB", "4000x1KB"} {
		for _, n := range []int{6, 24} {
			for _, budget := range []int64{-1, 0, 4 << 20} {
				name := fmt.Sprintf("shape=%s/appends=%d/budget=%s", shape, n, map[int64]string{-1: "off", 0: "8MiB", 4 << 20: "4MiB"}[budget])
				b.Run(name, func(b *testing.B) { benchLargeAppends(b, shape, n, budget) })
			}
		}
	}
}

func benchLargeAppends(b *testing.B, shape string, n int, budget int64) {
	e, hs := benchServer(b, engine.Options{LeaseTTL: time.Minute}, api.Options{Limits: api.Limits{BodyBytes: budget, BodyWait: time.Minute}})
	ctx := context.Background()

	// A body per append, each to its own run (a run takes one writer).
	var count, size int
	switch shape {
	case "4x1MB":
		count, size = 4, 1_000_000
	default:
		count, size = 4000, 1000
	}
	bodies := make([][]byte, n)
	for i := range bodies {
		var buf bytes.Buffer
		buf.WriteByte('[')
		for j := range count {
			if j > 0 {
				buf.WriteByte(',')
			}
			fmt.Fprintf(&buf, `{"type":"text.delta","message_id":"m1","delta":"%s"}`, strings.Repeat("x", size-16))
		}
		buf.WriteByte(']')
		bodies[i] = buf.Bytes()
	}
	type held struct{ run, lease string }
	runs := make([]held, n)
	newRuns := func() {
		for i := range runs {
			tid := fmt.Sprintf("t%d-%d", i, time.Now().UnixNano())
			c := heldRun(ctx, b, e, tid)
			runs[i] = held{c.Run.ID, c.Lease.Token}
		}
	}

	var peakHeap, peakRSS, retained float64
	for b.Loop() {
		b.StopTimer()
		newRuns()
		runtime.GC()
		heap0 := heapInUse()
		resetPeakRSS()
		rss0 := peakRSSBytes()
		stop := make(chan struct{})
		var maxHeap atomic.Uint64
		var sampler sync.WaitGroup
		sampler.Go(func() {
			t := time.NewTicker(time.Millisecond)
			defer t.Stop()
			for {
				if h := heapInUse(); h > maxHeap.Load() {
					maxHeap.Store(h)
				}
				select {
				case <-stop:
					return
				case <-t.C:
				}
			}
		})
		b.StartTimer()

		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				req, _ := http.NewRequest("POST", hs.URL+"/v1/runs/"+runs[i].run+"/events", bytes.NewReader(bodies[i]))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Tether-Lease", runs[i].lease)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				msg, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					b.Errorf("append: %d %s", res.StatusCode, msg)
				}
			})
		}
		wg.Wait()

		b.StopTimer()
		close(stop)
		sampler.Wait()
		runtime.GC()
		retained = max(retained, float64(heapInUse()-min(heapInUse(), heap0))/(1<<20))
		peakHeap = max(peakHeap, float64(maxHeap.Load()-min(maxHeap.Load(), heap0))/(1<<20))
		peakRSS = max(peakRSS, float64(peakRSSBytes()-min(peakRSSBytes(), rss0))/(1<<20))
		b.StartTimer()
	}
	b.ReportMetric(peakHeap, "peak-heap-MiB")
	b.ReportMetric(peakRSS, "peak-rss-MiB")
	b.ReportMetric(retained, "retained-heap-MiB")
}

var heapSample = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}

func heapInUse() uint64 {
	metrics.Read(heapSample)
	return heapSample[0].Value.Uint64()
}

// resetPeakRSS resets the process's VmHWM (Linux; elsewhere it does
// nothing and the RSS figures are of the whole run).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSSBytes returns the process's VmHWM (0 where there is none).
func peakRSSBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
