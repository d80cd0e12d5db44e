package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	tether "github.com/tetherhq/tether"
)

// latencyResult is the outcome of the latency scenario.
type latencyResult struct {
	Scenario      string           `json:"scenario"`
	Rate          int              `json:"rate"`
	EventBytes    int              `json:"event_bytes"`
	Seconds       float64          `json:"seconds"`
	Sent          int64            `json:"sent"`
	Received      int64            `json:"received"`
	Lost          int64            `json:"lost"`
	SentPerSec    float64          `json:"sent_per_sec"`
	Latency       latency          `json:"delivery_latency"`
	AppendLatency latency          `json:"append_latency"`
	CPU           cpuUse           `json:"cpu"`
	Errors        int64            `json:"errors"`
	ErrorKinds    map[string]int64 `json:"error_kinds,omitempty"`
	Interrupted   bool             `json:"interrupted,omitempty"`
}

func (r *latencyResult) name() string {
	return interrupted(fmt.Sprintf("latency: %s events/s of %d B to one subscriber, a batch every millisecond", commas(int64(r.Rate)), r.EventBytes), r.Interrupted)
}

func (r *latencyResult) rows() [][2]string {
	return [][2]string{
		{"duration", fmt.Sprintf("%.1fs", r.Seconds)},
		{"events sent", fmt.Sprintf("%s (%s)", commas(r.Sent), fmtRate(r.SentPerSec))},
		{"events received", fmt.Sprintf("%s (%s in failed appends)", commas(r.Received), commas(r.Lost))},
		{"append → subscriber", r.Latency.String()},
		{"append request", r.AppendLatency.String()},
		{"CPU", r.CPU.String()},
		{"errors", errorsCell(r.Errors, r.ErrorKinds)},
	}
}

// latencyClock is the clock events carry: nanoseconds since it was made,
// monotonic, shared by producer and subscriber (one process).
type latencyClock struct{ base time.Time }

func (c latencyClock) at(t time.Time) int64 { return int64(t.Sub(c.base)) }

// latencyScenario measures append → subscriber latency at a steady rate.
// Each event carries the time it was due (not the time it was sent), so a
// slow append shows as latency instead of hiding it (coordinated omission).
func (b *bencher) latencyScenario(ctx context.Context) (result, error) {
	c := b.c
	fmt.Fprintf(b.stderr, "latency: setting up one thread and a subscriber on %s\n", c.server)
	runs, err := b.startRuns(ctx, 1)
	if err != nil {
		return nil, err
	}
	defer b.finishRuns(runs)
	lr := runs[0]

	clock := latencyClock{base: time.Now()}
	var mu sync.Mutex
	var cur, total hist
	var bad atomic.Int64
	onEvent := func(f *sseFrame, now time.Time) {
		i := bytes.Index(f.data, []byte(`"t":`))
		if string(f.event) != "custom" || i < 0 {
			return
		}
		j := i + 4
		for j < len(f.data) && f.data[j] >= '0' && f.data[j] <= '9' {
			j++
		}
		t, err := strconv.ParseInt(string(f.data[i+4:j]), 10, 64)
		if err != nil {
			bad.Add(1)
			return
		}
		mu.Lock()
		cur.record(time.Duration(clock.at(now) - t))
		mu.Unlock()
	}
	subs, stopSubs, err := b.openSubscribers(ctx, lr.thread, 1, true, onEvent)
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			stopSubs()
		}
	}()
	sub := subs[0]

	var sent atomic.Int64
	var errs errorCounts
	var appendHist hist
	stop := make(chan struct{})
	progressDone := make(chan struct{})
	var lastS, lastR int64
	go func() {
		defer close(progressDone)
		b.progress(stop, func(el time.Duration) string {
			s, r := sent.Load(), sub.received.Load()
			mu.Lock()
			p99 := cur.quantile(.99)
			total.merge(&cur)
			cur = hist{}
			mu.Unlock()
			n, _, _ := errs.get()
			line := fmt.Sprintf("latency %4s  sent %s events/s  received %s events/s  p99 %s  errors %s",
				el, commas(s-lastS), commas(r-lastR), p99.Round(time.Microsecond), commas(n))
			lastS, lastR = s, r
			return line
		})
	}()

	fmt.Fprintf(b.stderr, "latency: sending %s events/s for %s\n", commas(int64(c.rate)), c.duration)
	pad := b.text()
	const maxBatch = 5000 // keeps a catching-up body well under the server's limit
	var body []byte
	var buf bytes.Buffer
	var lost int64 // events of failed appends
	rc := b.api.rawConn()
	defer rc.close()
	cpu := b.startCPU(ctx)
	start := time.Now()
	deadline := start.Add(c.duration)
	perEvent := float64(time.Second) / float64(c.rate)
	for tick := start; ctx.Err() == nil; {
		now := time.Now()
		if !now.Before(deadline) {
			break
		}
		due := int64(float64(now.Sub(start)) / perEvent)
		if n := min(due-sent.Load(), maxBatch); n > 0 {
			s0 := sent.Load()
			body = append(body[:0], '[')
			for i := range n {
				if i > 0 {
					body = append(body, ',')
				}
				at := start.Add(time.Duration(float64(s0+i) * perEvent))
				body = append(body, `{"type":"custom","name":"bench","data":{"t":`...)
				body = strconv.AppendInt(body, clock.at(at), 10)
				body = append(body, `,"text":`...)
				body = strconv.AppendQuote(body, pad)
				body = append(body, "}}"...)
			}
			body = append(body, ']')
			t0 := time.Now()
			status, err := rc.send(lr.events, body, &buf)
			if err == nil && status != http.StatusOK {
				err = serverErr(status, buf.Bytes())
			}
			if err != nil {
				errs.add(err)
				lost += n
				var te *tether.Error
				if !errors.As(err, &te) {
					time.Sleep(50 * time.Millisecond)
				}
			} else {
				appendHist.record(time.Since(t0))
			}
			sent.Add(n) // due either way: a failed batch shows as events never received
		}
		tick = tick.Add(time.Millisecond)
		if d := time.Until(tick); d > 0 {
			time.Sleep(d)
		} else {
			tick = time.Now()
		}
	}
	elapsed := time.Since(start)
	failed, kinds, first := errs.get()
	want := sent.Load() - lost
	drainBy := time.Now().Add(drainTime(ctx, 5*time.Second))
	for sub.received.Load() < want && time.Now().Before(drainBy) {
		time.Sleep(time.Millisecond)
	}
	used := cpu.stop(context.Background(), b)
	close(stop)
	<-progressDone
	stopSubs()
	stopped = true
	total.merge(&cur)

	r := &latencyResult{
		Scenario: "latency", Rate: c.rate, EventBytes: c.eventBytes, Seconds: seconds(elapsed),
		Sent: sent.Load(), Received: sub.received.Load(), Lost: lost, SentPerSec: perSec(sent.Load(), elapsed),
		Latency: total.summary(), AppendLatency: appendHist.summary(), CPU: used,
		Errors: failed, ErrorKinds: kinds, Interrupted: ctx.Err() != nil,
	}
	if r.Received == 0 && first != nil {
		return r, fmt.Errorf("no event arrived; the first error: %w", first)
	}
	return r, nil
}
