package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	tether "github.com/tetherhq/tether"
)

// runsResult is the outcome of the runs scenario.
type runsResult struct {
	Scenario       string           `json:"scenario"`
	Runs           int              `json:"runs"`
	Subscribers    int              `json:"subscribers_per_run"`
	Tokens         int              `json:"tokens"`
	DelayMs        int              `json:"delay_ms"`
	CreateSeconds  float64          `json:"create_seconds"`           // creating every run
	Seconds        float64          `json:"seconds"`                  // first create to the last run.finished delivered
	MaxRunning     int64            `json:"max_running"`              // most runs started and not finished at once
	LastStartAfter float64          `json:"last_start_after_seconds"` // first create to the last run.started
	Finished       int              `json:"finished"`                 // runs whose subscribers all got run.finished
	Events         int64            `json:"events"`                   // events in the threads' logs
	Delivered      int64            `json:"delivered"`                // events delivered, over all subscribers
	Complete       bool             `json:"complete"`                 // every subscriber got its thread's whole log, in order
	Short          int              `json:"short_subscribers"`
	OutOfOrder     int64            `json:"out_of_order"`
	Resumes        int64            `json:"resumes"`
	Latency        latency          `json:"delivery_latency"` // event ts to receipt, ms resolution
	CPU            cpuUse           `json:"cpu"`
	Memory         runsMem          `json:"memory"`
	Errors         int64            `json:"errors"`
	ErrorKinds     map[string]int64 `json:"error_kinds,omitempty"`
	Interrupted    bool             `json:"interrupted,omitempty"`
}

// runsMem is the server's memory over the scenario, from /metrics.
type runsMem struct {
	RSSStart       float64 `json:"rss_start_bytes"`          // before anything
	RSSSubscribed  float64 `json:"rss_subscribed_bytes"`     // with the streams open, before the runs
	RSSPeak        float64 `json:"rss_peak_bytes"`           // the highest sample while runs ran
	HeapPeak       float64 `json:"heap_inuse_peak_bytes"`    // the same for the Go heap in use
	GoroutinesPeak float64 `json:"goroutines_peak"`          // and goroutines
	RSSEnd         float64 `json:"rss_end_bytes"`            // right after the last run finished, streams closed
	RSSIdle        float64 `json:"rss_idle_bytes"`           // after --settle with nothing to do
	HeapIdle       float64 `json:"heap_inuse_idle_bytes"`    // the Go heap in use then
	GoIdle         float64 `json:"go_runtime_idle_bytes"`    // all the Go runtime holds then (sys - released): the rest of rss is SQLite and the binary
	PerRun         float64 `json:"rss_bytes_per_live_run"`   // (peak - subscribed) / runs
	PerSubscriber  float64 `json:"rss_bytes_per_subscriber"` // (subscribed - start) / subscribers
	SettleSeconds  float64 `json:"settle_seconds"`
}

func (r *runsResult) name() string {
	return interrupted(fmt.Sprintf("runs: %s demo runs at once (%d tokens, %d ms apart), %d SSE subscriber(s) each", commas(int64(r.Runs)), r.Tokens, r.DelayMs, r.Subscribers), r.Interrupted)
}

func (r *runsResult) rows() [][2]string {
	complete := "yes: every subscriber got its thread's whole log, in order"
	if !r.Complete {
		complete = fmt.Sprintf("NO: %d subscriber(s) short, %d event(s) out of order", r.Short, r.OutOfOrder)
	}
	m := r.Memory
	return [][2]string{
		{"runs finished", fmt.Sprintf("%s of %s", commas(int64(r.Finished)), commas(int64(r.Runs)))},
		{"most runs at once", commas(r.MaxRunning)},
		{"last run started", fmt.Sprintf("%.1fs after the first was created (creating all took %.1fs)", r.LastStartAfter, r.CreateSeconds)},
		{"duration", fmt.Sprintf("%.1fs", r.Seconds)},
		{"events", fmt.Sprintf("%s in the logs, %s delivered", commas(r.Events), commas(r.Delivered))},
		{"complete", complete},
		{"resumes", commas(r.Resumes)},
		{"delivery (event ts → received)", r.Latency.String()},
		{"CPU while runs ran", r.CPU.String()},
		{"server resident memory", fmt.Sprintf("%s at start, %s with the streams open, %s peak with the runs (Go heap %s), %s when they ended, %s after %.0fs idle (Go heap %s, Go runtime %s)",
			fmtBytes(m.RSSStart), fmtBytes(m.RSSSubscribed), fmtBytes(m.RSSPeak), fmtBytes(m.HeapPeak), fmtBytes(m.RSSEnd), fmtBytes(m.RSSIdle), m.SettleSeconds, fmtBytes(m.HeapIdle), fmtBytes(m.GoIdle))},
		{"per live run / per subscriber", fmt.Sprintf("%s / %s (resident)", fmtBytes(m.PerRun), fmtBytes(m.PerSubscriber))},
		{"server goroutines, peak", commas(int64(m.GoroutinesPeak))},
		{"errors", errorsCell(r.Errors, r.ErrorKinds)},
	}
}

// runTrack is what the subscribers of one run saw of it.
type runTrack struct {
	thread  string
	subs    []*subscriber
	started atomic.Bool
	ended   atomic.Int32 // subscribers that got run.finished
}

// runsScenario starts --runs demo runs at once, each on a thread of its
// own that --run-subscribers SSE clients follow from its first event, and
// measures how many run at once, whether every subscriber gets every event
// in order, delivery latency, and the server's CPU and memory during and
// after.
func (b *bencher) runsScenario(ctx context.Context) (result, error) {
	c := b.c
	n, m := c.runs, c.runSubscribers
	if limit, err := raiseFileLimit(uint64(n*m) + 512); err != nil || limit < uint64(n*m)+128 {
		return nil, fmt.Errorf("%d subscribers need more open files than this process may have (%d): raise ulimit -n", n*m, limit)
	}
	start, err := b.metrics(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(b.stderr, "runs: creating %s threads with %d subscriber(s) each on %s\n", commas(int64(n)), m, c.server)
	tracks := make([]*runTrack, n)
	err = parallel(ctx, n, 16, func(ctx context.Context, i int) error {
		tid, err := b.newThread(ctx)
		tracks[i] = &runTrack{thread: tid}
		return err
	})
	if err != nil {
		return nil, err
	}

	var errs errorCounts
	var startedN, finishedN, running, maxRunning atomic.Int64
	var lastStart atomic.Int64 // unix nanos
	var delivered atomic.Int64
	const shards = 32
	var hmu [shards]sync.Mutex
	hists := make([]*hist, shards)
	for i := range hists {
		hists[i] = new(hist)
	}
	sctx, stopAll := context.WithCancel(context.Background())
	defer stopAll()
	var wg sync.WaitGroup
	var opened atomic.Int64
	sem := make(chan struct{}, 32)
	for i, tr := range tracks {
		for j := range m {
			s := newSubscriber(b.api, tr.thread, true)
			s.path = "/v1/threads/" + tr.thread + "/events?after=-1"
			tr.subs = append(tr.subs, s)
			subCtx, stop := context.WithCancel(sctx)
			shard := (i*m + j) % shards
			first := j == 0
			s.onEvent = func(f *sseFrame, now time.Time) {
				delivered.Add(1)
				if ts, ok := eventTime(f.data); ok {
					hmu[shard].Lock()
					hists[shard].record(now.Sub(ts))
					hmu[shard].Unlock()
				}
				switch string(f.event) {
				case tether.EventRunStarted:
					if first && tr.started.CompareAndSwap(false, true) {
						startedN.Add(1)
						lastStart.Store(now.UnixNano())
						r := running.Add(1)
						for mx := maxRunning.Load(); r > mx && !maxRunning.CompareAndSwap(mx, r); mx = maxRunning.Load() {
						}
					}
				case tether.EventRunFinished:
					if first {
						finishedN.Add(1)
						running.Add(-1)
					}
					tr.ended.Add(1)
					stop()
				}
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				go func() { <-s.connected; opened.Add(1); <-sem }()
				s.run(subCtx)
				stop()
			}()
		}
	}
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		b.progress(stopProgress, func(el time.Duration) string {
			return fmt.Sprintf("runs %4s  streams %s  running %s  started %s  finished %s of %s  delivered %s",
				el, commas(opened.Load()), commas(running.Load()), commas(startedN.Load()), commas(finishedN.Load()), commas(int64(n)), commas(delivered.Load()))
		})
	}()
	defer func() {
		select {
		case <-stopProgress:
		default:
			close(stopProgress)
		}
		<-progressDone
	}()
	for opened.Load() < int64(n*m) && ctx.Err() == nil {
		for _, tr := range tracks {
			for _, s := range tr.subs {
				select {
				case <-s.connected:
				case <-ctx.Done():
				}
				if s.err != nil {
					return nil, duringBench("subscribe", s.err)
				}
			}
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	sleepCtx(ctx, time.Second) // the streams' first frames are written
	subscribed, err := b.metrics(ctx)
	if err != nil {
		return nil, err
	}

	// Sample the server while the runs run.
	var peak serverMem
	samplerDone := make(chan struct{})
	stopSampler := make(chan struct{})
	go func() {
		defer close(samplerDone)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopSampler:
				return
			case <-t.C:
				if sm, err := b.metrics(context.Background()); err == nil {
					peak.rss, peak.heap, peak.goroutines = max(peak.rss, sm.rss), max(peak.heap, sm.heap), max(peak.goroutines, sm.goroutines)
				}
			}
		}
	}()

	fmt.Fprintf(b.stderr, "runs: creating %s runs of the demo agent at once\n", commas(int64(n)))
	body := map[string]any{
		"agent":    "demo",
		"input":    map[string]any{"messages": []map[string]string{{"role": "user", "content": "bench"}}},
		"metadata": map[string]any{"demo": map[string]any{"tokens": c.tokens, "delay_ms": c.delayMs}},
	}
	cpu := b.startCPU(ctx)
	t0 := time.Now()
	err = parallel(ctx, n, 64, func(ctx context.Context, i int) error {
		if _, err := b.api.call(ctx, http.MethodPost, "/v1/threads/"+tracks[i].thread+"/runs", body, nil); err != nil {
			errs.add(err)
			return duringBench("create a run", err)
		}
		return nil
	})
	created := time.Since(t0)
	if err != nil {
		close(stopSampler)
		<-samplerDone
		return nil, err
	}
	wg.Wait() // every subscriber got its run.finished (or ctx ended)
	elapsed := time.Since(t0)
	used := cpu.stop(context.Background(), b)
	close(stopSampler)
	<-samplerDone
	close(stopProgress)
	<-progressDone

	r := &runsResult{
		Scenario: "runs", Runs: n, Subscribers: m, Tokens: c.tokens, DelayMs: c.delayMs,
		CreateSeconds: seconds(created), Seconds: seconds(elapsed), MaxRunning: maxRunning.Load(),
		Delivered: delivered.Load(), CPU: used, Interrupted: ctx.Err() != nil,
	}
	if ls := lastStart.Load(); ls > 0 {
		r.LastStartAfter = seconds(time.Unix(0, ls).Sub(t0))
	}
	var h hist
	for _, x := range hists {
		h.merge(x)
	}
	r.Latency = h.summary()

	// Check every subscriber against its thread's log.
	fmt.Fprintf(b.stderr, "runs: checking every subscriber against its thread's log\n")
	var events atomic.Int64
	var mu sync.Mutex
	_ = parallel(context.Background(), n, 8, func(ctx context.Context, i int) error {
		tr := tracks[i]
		count, last, err := b.logOf(ctx, tr.thread)
		if err != nil {
			errs.add(err)
			return nil
		}
		events.Add(count)
		mu.Lock()
		defer mu.Unlock()
		if int(tr.ended.Load()) == m {
			r.Finished++
		}
		for _, s := range tr.subs {
			if s.received.Load() != count || string(s.last) != string(last) {
				r.Short++
			}
			r.OutOfOrder += s.disorder
			r.Resumes += s.resumes
		}
		return nil
	})
	r.Events = events.Load()
	r.Complete = r.Short == 0 && r.OutOfOrder == 0 && r.Finished == n

	end, err := b.metrics(context.Background())
	if err != nil {
		return r, err
	}
	fmt.Fprintf(b.stderr, "runs: idle for %s, then reading the server's memory\n", c.settle)
	sleepCtx(ctx, c.settle)
	idle, err := b.sampleMem(context.Background(), 3, time.Second)
	if err != nil {
		return r, err
	}
	r.Memory = runsMem{
		RSSStart: start.rss, RSSSubscribed: subscribed.rss, RSSPeak: peak.rss, HeapPeak: peak.heap,
		GoroutinesPeak: peak.goroutines, RSSEnd: end.rss, RSSIdle: idle.rss, HeapIdle: idle.heap, GoIdle: idle.sys - idle.released,
		PerRun:        (peak.rss - subscribed.rss) / float64(n),
		PerSubscriber: (subscribed.rss - start.rss) / float64(n*m),
		SettleSeconds: c.settle.Seconds(),
	}
	r.Errors, r.ErrorKinds, _ = errs.get()
	return r, nil
}

// eventTime reads an event's ts from its JSON without decoding the rest.
func eventTime(data []byte) (time.Time, bool) {
	i := bytes.Index(data, []byte(`"ts":"`))
	if i < 0 || len(data) < i+6+len(tether.TimeLayout)-5 {
		return time.Time{}, false
	}
	rest := data[i+6:]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return time.Time{}, false
	}
	t, err := time.Parse(tether.TimeLayout, string(rest[:j]))
	return t, err == nil
}

// logOf reads a thread's whole log as JSON pages and returns the number of
// events and the last offset.
func (b *bencher) logOf(ctx context.Context, thread string) (int64, []byte, error) {
	var n int64
	after := string(tether.OffsetStart)
	for {
		var page struct {
			Events   []struct{} `json:"events"`
			Next     string     `json:"next_offset"`
			UpToDate bool       `json:"up_to_date"`
		}
		if _, err := b.api.call(ctx, http.MethodGet, "/v1/threads/"+thread+"/events?after="+after, nil, &page, "Accept", "application/json"); err != nil {
			return 0, nil, duringBench("read the log of "+thread, err)
		}
		n += int64(len(page.Events))
		if page.Next != "" {
			after = page.Next
		}
		if page.UpToDate || len(page.Events) == 0 {
			if n == 0 {
				return 0, nil, nil
			}
			return n, []byte(after), nil
		}
	}
}
