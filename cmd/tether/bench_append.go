package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tether "github.com/tetherhq/tether"
)

// appendResult is the outcome of the append scenario.
type appendResult struct {
	Scenario       string           `json:"scenario"`
	Kind           string           `json:"kind"`
	Threads        int              `json:"threads"`
	Concurrency    int              `json:"concurrency"`
	Batch          int              `json:"batch"`
	EventBytes     int              `json:"event_bytes"`
	Seconds        float64          `json:"seconds"`
	Events         int64            `json:"events"`
	Requests       int64            `json:"requests"`
	Errors         int64            `json:"errors"`
	ErrorKinds     map[string]int64 `json:"error_kinds,omitempty"`
	EventsPerSec   float64          `json:"events_per_sec"`
	RequestsPerSec float64          `json:"requests_per_sec"`
	Latency        latency          `json:"request_latency"`
	CPU            cpuUse           `json:"cpu"`
	Interrupted    bool             `json:"interrupted,omitempty"`
}

func (r *appendResult) name() string {
	return interrupted(fmt.Sprintf("append: %d thread(s), %d in flight, %d %s event(s) of %d B per request", r.Threads, r.Concurrency, r.Batch, r.Kind, r.EventBytes), r.Interrupted)
}

func (r *appendResult) rows() [][2]string {
	return [][2]string{
		{"duration", fmt.Sprintf("%.1fs", r.Seconds)},
		{"events appended", commas(r.Events)},
		{"events/s", fmtRate(r.EventsPerSec)},
		{"requests/s", fmtRate(r.RequestsPerSec)},
		{"request latency", r.Latency.String()},
		{"CPU", r.CPU.String()},
		{"events/s per server core", perCore(r.EventsPerSec, r.CPU.Server)},
		{"errors", errorsCell(r.Errors, r.ErrorKinds)},
	}
}

func errorsCell(n int64, kinds map[string]int64) string {
	if n == 0 {
		return "0"
	}
	var parts []string
	for k, v := range kinds {
		parts = append(parts, fmt.Sprintf("%s ×%s", k, commas(v)))
	}
	return commas(n) + " (" + strings.Join(parts, ", ") + ")"
}

// errorCounts counts errors by kind, keeping the first of each.
type errorCounts struct {
	mu    sync.Mutex
	n     int64
	kinds map[string]int64
	first error
}

func (e *errorCounts) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.kinds == nil {
		e.kinds = make(map[string]int64)
	}
	e.n++
	e.kinds[errKind(err)]++
	if e.first == nil {
		e.first = err
	}
}

func (e *errorCounts) get() (int64, map[string]int64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	kinds := make(map[string]int64, len(e.kinds))
	for k, v := range e.kinds {
		kinds[k] = v
	}
	return e.n, kinds, e.first
}

// filler returns n bytes of plain text (JSON-safe).
func filler(n int) string {
	const words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor "
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words[:min(len(words), n-b.Len())])
	}
	return b.String()
}

// appendBody builds the body of one append: batch events of the bench's
// kind. seq makes message ids unique for --kind message.
func (b *bencher) appendBody(dst []byte, kind string, lr *leasedRun, worker int, seq *int64) []byte {
	dst = append(dst[:0], '[')
	for i := range b.c.batch {
		if i > 0 {
			dst = append(dst, ',')
		}
		if kind == "delta" {
			dst = append(dst, `{"type":"text.delta","message_id":`...)
			dst = strconv.AppendQuote(dst, lr.message)
			dst = append(dst, `,"delta":`...)
			dst = strconv.AppendQuote(dst, b.text())
			dst = append(dst, '}')
			continue
		}
		*seq++
		dst = append(dst, `{"type":"message.created","message":{"id":"m`...)
		dst = strconv.AppendInt(dst, int64(worker), 36)
		dst = append(dst, '-')
		dst = strconv.AppendInt(dst, *seq, 36)
		dst = append(dst, `","role":"assistant","status":"done","parts":[{"type":"text","text":`...)
		dst = strconv.AppendQuote(dst, b.text())
		dst = append(dst, `}]}}`...)
	}
	return append(dst, ']')
}

var fillerCache sync.Map // int → string

func (b *bencher) text() string {
	if s, ok := fillerCache.Load(b.c.eventBytes); ok {
		return s.(string)
	}
	s := filler(b.c.eventBytes)
	fillerCache.Store(b.c.eventBytes, s)
	return s
}

// appendScenario measures durable ingest: --concurrency workers append
// batches to --threads runs as fast as the server acknowledges them.
func (b *bencher) appendScenario(ctx context.Context) (result, error) {
	c := b.c
	fmt.Fprintf(b.stderr, "append: setting up %d thread(s) on %s\n", c.threads, c.server)
	runs, err := b.startRuns(ctx, c.threads)
	if err != nil {
		return nil, err
	}
	defer b.finishRuns(runs)
	b.prebuild(runs)

	// Each worker appends to its own threads in turn; with more workers
	// than threads, several share each thread.
	plan := make([][]*leasedRun, c.concurrency)
	for w := range c.concurrency {
		for i := w % c.threads; i < c.threads; i += c.concurrency {
			plan[w] = append(plan[w], runs[i])
		}
	}

	var events, requests atomic.Int64
	var errs errorCounts
	hists := make([]*hist, c.concurrency)
	stop := make(chan struct{})
	var stopped atomic.Bool
	go func() {
		select {
		case <-ctx.Done():
			stopped.Store(true)
		case <-stop:
		}
	}()

	fmt.Fprintf(b.stderr, "append: %d worker(s) for %s\n", c.concurrency, c.duration)
	cpu := b.startCPU(ctx)
	start := time.Now()
	deadline := start.Add(c.duration)
	progressDone := make(chan struct{})
	var lastEvents, lastReqs int64
	go func() {
		defer close(progressDone)
		b.progress(stop, func(el time.Duration) string {
			ev, rq := events.Load(), requests.Load()
			n, _, _ := errs.get()
			line := fmt.Sprintf("append %4s  %s events/s  %s requests/s  errors %s", el, commas(ev-lastEvents), commas(rq-lastReqs), commas(n))
			lastEvents, lastReqs = ev, rq
			return line
		})
	}()

	var wg sync.WaitGroup
	for w := range c.concurrency {
		h := new(hist)
		hists[w] = h
		wg.Go(func() {
			var seq int64
			var body []byte
			var buf bytes.Buffer
			rc := b.api.rawConn()
			defer rc.close()
			mine := plan[w]
			for i := 0; !stopped.Load(); i++ {
				lr := mine[i%len(mine)]
				if c.kind == "delta" && lr.body != nil {
					body = lr.body
				} else {
					body = b.appendBody(body, c.kind, lr, w, &seq)
				}
				t0 := time.Now()
				if !t0.Before(deadline) {
					return
				}
				// A request in flight when the bench stops finishes.
				status, err := rc.send(lr.events, body, &buf)
				d := time.Since(t0)
				if err == nil && status != http.StatusOK {
					err = serverErr(status, buf.Bytes())
				}
				if err != nil {
					errs.add(err)
					var te *tether.Error
					if !errors.As(err, &te) {
						time.Sleep(50 * time.Millisecond) // the server is gone or overwhelmed: don't spin
					}
					continue
				}
				h.record(d)
				requests.Add(1)
				events.Add(int64(c.batch))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	used := cpu.stop(context.Background(), b)
	close(stop)
	<-progressDone

	var all hist
	for _, h := range hists {
		all.merge(h)
	}
	n, kinds, first := errs.get()
	r := &appendResult{
		Scenario: "append", Kind: c.kind, Threads: c.threads, Concurrency: c.concurrency, Batch: c.batch,
		EventBytes: c.eventBytes, Seconds: seconds(elapsed), Events: events.Load(), Requests: requests.Load(),
		Errors: n, ErrorKinds: kinds, Latency: all.summary(), CPU: used, Interrupted: ctx.Err() != nil,
	}
	r.EventsPerSec, r.RequestsPerSec = perSec(r.Events, elapsed), perSec(r.Requests, elapsed)
	if r.Requests == 0 && first != nil {
		return r, fmt.Errorf("every append failed; the first: %w", first)
	}
	return r, nil
}

// prebuild sets the body of delta appends, which is the same for every
// request to a run.
func (b *bencher) prebuild(runs []*leasedRun) {
	if b.c.kind != "delta" {
		return
	}
	for _, lr := range runs {
		lr.body = b.appendBody(nil, "delta", lr, 0, nil)
	}
}
