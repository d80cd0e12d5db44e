package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	tether "github.com/tetherhq/tether"
)

// fanoutResult is the outcome of the fanout scenario.
type fanoutResult struct {
	Scenario        string           `json:"scenario"`
	Subscribers     int              `json:"subscribers"`
	Concurrency     int              `json:"concurrency"`
	Batch           int              `json:"batch"`
	EventBytes      int              `json:"event_bytes"`
	Window          int              `json:"window"`
	Seconds         float64          `json:"seconds"`
	Appended        int64            `json:"appended"`
	AppendedPerSec  float64          `json:"appended_per_sec"`
	Delivered       int64            `json:"delivered"`
	DeliveredPerSec float64          `json:"delivered_per_sec"`
	Complete        bool             `json:"complete"`
	Incomplete      int              `json:"incomplete_subscribers"`
	OutOfOrder      int64            `json:"out_of_order"`
	Resumes         int64            `json:"resumes"`
	Errors          int64            `json:"errors"`
	ErrorKinds      map[string]int64 `json:"error_kinds,omitempty"`
	Latency         latency          `json:"request_latency"`
	CPU             cpuUse           `json:"cpu"`
	Interrupted     bool             `json:"interrupted,omitempty"`
}

func (r *fanoutResult) name() string {
	return interrupted(fmt.Sprintf("fanout: %d subscriber(s) of one thread, %d event(s) of %d B per append, %d append(s) in flight", r.Subscribers, r.Batch, r.EventBytes, r.Concurrency), r.Interrupted)
}

func (r *fanoutResult) rows() [][2]string {
	complete := "yes: every subscriber got every event, in order"
	if !r.Complete {
		complete = fmt.Sprintf("NO: %d subscriber(s) short, %d event(s) out of order", r.Incomplete, r.OutOfOrder)
	}
	window := commas(int64(r.Window)) + " events"
	if r.Window == 0 {
		window = "none"
	}
	return [][2]string{
		{"duration", fmt.Sprintf("%.1fs", r.Seconds)},
		{"events appended", commas(r.Appended)},
		{"appended events/s", fmtRate(r.AppendedPerSec)},
		{"delivered events/s", fmtRate(r.DeliveredPerSec) + " (sum over subscribers)"},
		{"complete", complete},
		{"resumes", commas(r.Resumes) + " (streams the server ended, e.g. slow consumers)"},
		{"producer window", window},
		{"append latency", r.Latency.String()},
		{"CPU", r.CPU.String()},
		{"delivered/s per server core", perCore(r.DeliveredPerSec, r.CPU.Server)},
		{"errors", errorsCell(r.Errors, r.ErrorKinds)},
	}
}

// fanoutScenario measures delivery: one producer appends as fast as it
// can to one thread that --subscribers SSE clients follow.
func (b *bencher) fanoutScenario(ctx context.Context) (result, error) {
	c := b.c
	fmt.Fprintf(b.stderr, "fanout: setting up one thread and %d subscriber(s) on %s\n", c.subscribers, c.server)
	runs, err := b.startRuns(ctx, 1)
	if err != nil {
		return nil, err
	}
	defer b.finishRuns(runs)
	lr := runs[0]
	subs, stopSubs, err := b.openSubscribers(ctx, lr.thread, c.subscribers, false, nil)
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			stopSubs()
		}
	}()

	body := b.appendBody(nil, "delta", lr, 0, nil)
	var appended, delivered atomic.Int64
	var inFlight atomic.Int64
	var errs errorCounts
	minReceived := func() int64 {
		m := int64(-1)
		for _, s := range subs {
			if n := s.received.Load(); m < 0 || n < m {
				m = n
			}
		}
		return m
	}
	total := func() int64 {
		var n int64
		for _, s := range subs {
			n += s.received.Load()
		}
		return n
	}

	fmt.Fprintf(b.stderr, "fanout: appending for %s\n", c.duration)
	stop := make(chan struct{})
	progressDone := make(chan struct{})
	var lastA, lastD int64
	go func() {
		defer close(progressDone)
		b.progress(stop, func(el time.Duration) string {
			a, d := appended.Load(), total()
			n, _, _ := errs.get()
			line := fmt.Sprintf("fanout %4s  appended %s events/s  delivered %s events/s  slowest subscriber %s behind  errors %s",
				el, commas(a-lastA), commas(d-lastD), commas(a-minReceived()), commas(n))
			lastA, lastD = a, d
			return line
		})
	}()

	cpu := b.startCPU(ctx)
	start := time.Now()
	deadline := start.Add(c.duration)
	hists := make([]*hist, c.concurrency)
	var wg sync.WaitGroup
	for w := range c.concurrency {
		h := new(hist)
		hists[w] = h
		wg.Go(func() {
			var buf bytes.Buffer
			rc := b.api.rawConn()
			defer rc.close()
			for ctx.Err() == nil && time.Now().Before(deadline) {
				if c.window > 0 {
					// Stay within the window of the slowest subscriber, so
					// that this measures delivery, not slow-consumer cuts.
					for appended.Load()+inFlight.Load()-minReceived() > int64(c.window) && ctx.Err() == nil && time.Now().Before(deadline) {
						time.Sleep(100 * time.Microsecond)
					}
				}
				inFlight.Add(int64(c.batch))
				t0 := time.Now()
				status, err := rc.send(lr.events, body, &buf)
				if err == nil && status != http.StatusOK {
					err = serverErr(status, buf.Bytes())
				}
				if err != nil {
					inFlight.Add(-int64(c.batch))
					errs.add(err)
					var te *tether.Error
					if !errors.As(err, &te) {
						time.Sleep(50 * time.Millisecond)
					}
					continue
				}
				h.record(time.Since(t0))
				appended.Add(int64(c.batch))
				inFlight.Add(-int64(c.batch))
			}
		})
	}
	wg.Wait()
	var h hist
	for _, x := range hists {
		h.merge(x)
	}
	produced := time.Since(start)

	// Wait for the subscribers to get everything (bounded), then stop.
	want := appended.Load()
	drainBy := time.Now().Add(drainTime(ctx, 10*time.Second))
	for minReceived() < want && time.Now().Before(drainBy) {
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	used := cpu.stop(context.Background(), b)
	delivered.Store(total())
	close(stop)
	<-progressDone
	stopSubs()
	stopped = true

	n, kinds, first := errs.get()
	r := &fanoutResult{
		Scenario: "fanout", Subscribers: c.subscribers, Concurrency: c.concurrency, Batch: c.batch, EventBytes: c.eventBytes, Window: c.window,
		Seconds: seconds(elapsed), Appended: want, AppendedPerSec: perSec(want, produced),
		Delivered: delivered.Load(), DeliveredPerSec: perSec(delivered.Load(), elapsed),
		Complete: true, Errors: n, ErrorKinds: kinds, Latency: h.summary(), CPU: used, Interrupted: ctx.Err() != nil,
	}
	for _, s := range subs {
		if s.received.Load() != want {
			r.Incomplete++
		}
		r.OutOfOrder += s.disorder
		r.Resumes += s.resumes
	}
	r.Complete = r.Incomplete == 0 && r.OutOfOrder == 0
	if want == 0 && first != nil {
		return r, fmt.Errorf("every append failed; the first: %w", first)
	}
	return r, nil
}
