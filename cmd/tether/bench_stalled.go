package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tether "github.com/tetherhq/tether"
)

// stalledResult is the outcome of the stalled scenario.
type stalledResult struct {
	Scenario      string  `json:"scenario"`
	Connections   int     `json:"connections"`
	Events        int     `json:"events"`
	EventBytes    int     `json:"event_bytes"`
	RSSBefore     float64 `json:"rss_before_bytes"`
	RSSStalled    float64 `json:"rss_stalled_bytes"`
	RSSPeak       float64 `json:"rss_peak_bytes"`
	RSSCut        float64 `json:"rss_after_cut_bytes"`
	RSSResumed    float64 `json:"rss_after_resume_bytes"`
	HeapPeak      float64 `json:"heap_inuse_peak_bytes"`
	StreamsPeak   float64 `json:"server_streams_peak"`
	StreamsCut    float64 `json:"server_streams_after_cut"`
	CutSlow       int64   `json:"cut_slow_consumer"`
	CutOther      int64   `json:"cut_without_reconnect_frame"`
	StillOpen     int64   `json:"still_open"`
	Resumed       int64   `json:"resumed_whole"`
	Lost          int64   `json:"clients_with_a_gap_or_duplicate"`
	ResumeSeconds float64 `json:"resume_seconds"`
	Interrupted   bool    `json:"interrupted,omitempty"`
}

func (r *stalledResult) name() string {
	return fmt.Sprintf("stalled: %s SSE clients of one thread stop reading while %s events (%d B of text each) are appended, then read again",
		commas(int64(r.Connections)), commas(int64(r.Events)), r.EventBytes)
}

func (r *stalledResult) rows() [][2]string {
	return [][2]string{
		{"resident memory before", fmtBytes(r.RSSBefore)},
		{"with the clients connected", fmtBytes(r.RSSStalled)},
		{"peak while appending and stalled", fmt.Sprintf("%s (Go heap in use %s; %s streams open)", fmtBytes(r.RSSPeak), fmtBytes(r.HeapPeak), commas(int64(r.StreamsPeak)))},
		{"once the stalled streams were cut", fmt.Sprintf("%s (%s streams open)", fmtBytes(r.RSSCut), commas(int64(r.StreamsCut)))},
		{"after every client resumed", fmtBytes(r.RSSResumed)},
		{"streams cut", fmt.Sprintf("%s with reconnect slow_consumer, %s without (write timeout), %s not ended when read again",
			commas(r.CutSlow), commas(r.CutOther), commas(r.StillOpen))},
		{"clients that resumed with every event, in order", fmt.Sprintf("%s of %s (%s with a gap or a duplicate) in %.1f s",
			commas(r.Resumed), commas(int64(r.Connections)), commas(r.Lost), r.ResumeSeconds)},
	}
}

// stalledScenario holds --connections SSE streams of one thread on raw
// connections that stop reading, appends --events events to the thread,
// and reads the server's memory before, while the streams are stalled
// (the subscribers' buffers fill up to 1 MiB or 8192 events, then they are
// cut) and after; then every client reads what it was sent and resumes
// with Last-Event-ID, and must receive every event of the log after its
// cursor exactly once, in order. Run the server with a short
// --write-timeout (e.g. 5s) so that streams blocked on a full socket are
// cut within the bench.
func (b *bencher) stalledScenario(ctx context.Context) (result, error) {
	c := b.c
	limit, err := raiseFileLimit(2*uint64(c.connections) + 256)
	if err != nil {
		return nil, err
	}
	if limit < uint64(c.connections)+64 {
		return nil, fmt.Errorf("--connections %d needs more open files than this process may have (%d): raise ulimit -n", c.connections, limit)
	}
	runs, err := b.startRuns(ctx, 1)
	if err != nil {
		return nil, err
	}
	defer b.finishRuns(runs)
	lr := runs[0]
	// The cursor: the thread's tail now, an event of its log.
	var poll struct {
		Next tether.Offset `json:"next_offset"`
	}
	if _, err := b.api.call(ctx, http.MethodGet, "/v1/threads/"+lr.thread+"/events?after=-1", nil, &poll, "Accept", "application/json"); err != nil {
		return nil, duringBench("read the thread's tail", err)
	}
	cursor := poll.Next
	fmt.Fprintf(b.stderr, "stalled: reading the server's memory before\n")
	before, err := b.sampleMem(ctx, 3, 300*time.Millisecond)
	if err != nil {
		return nil, err
	}

	fmt.Fprintf(b.stderr, "stalled: opening %s streams from %s\n", commas(int64(c.connections)), cursor)
	conns := make([]net.Conn, c.connections)
	defer func() {
		for _, cn := range conns {
			if cn != nil {
				cn.Close()
			}
		}
	}()
	err = parallel(ctx, c.connections, 32, func(ctx context.Context, i int) error {
		cn, err := b.dialStream(ctx, "/v1/threads/"+lr.thread+"/events?after="+string(cursor))
		if err != nil {
			return duringBench(fmt.Sprintf("open stream %d", i+1), err)
		}
		// A small receive buffer, so that the kernel holds little of what
		// the server sends and the server's buffers are what fill.
		if tc, ok := cn.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(16 << 10)
		}
		conns[i] = cn
		return nil
	})
	if err != nil {
		return nil, err
	}
	r := &stalledResult{Scenario: "stalled", Connections: c.connections, Events: c.events, EventBytes: c.eventBytes, RSSBefore: before.rss}
	stalled, err := b.sampleMem(ctx, 3, 300*time.Millisecond)
	if err != nil {
		return nil, err
	}
	r.RSSStalled = stalled.rss

	// Append while sampling the memory every 500 ms.
	var peak serverMem
	var peakMu sync.Mutex
	sampleDone := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampleDone)
		for {
			if m, err := b.metrics(ctx); err == nil {
				peakMu.Lock()
				peak.rss, peak.heap, peak.streams = max(peak.rss, m.rss), max(peak.heap, m.heap), max(peak.streams, m.streams)
				peakMu.Unlock()
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	text := strings.Repeat("x", c.eventBytes)
	fmt.Fprintf(b.stderr, "stalled: appending %s events while nobody reads\n", commas(int64(c.events)))
	for sent := 0; sent < c.events && ctx.Err() == nil; {
		n := min(c.batch, c.events-sent)
		evs := make([]map[string]any, n)
		for i := range evs {
			evs[i] = map[string]any{"type": tether.EventTextDelta, "message_id": lr.message, "delta": text}
		}
		if err := b.appendJSON(ctx, lr, evs); err != nil {
			close(stopSampling)
			<-sampleDone
			return nil, err
		}
		sent += n
	}
	// Hold the stalled streams until the server has cut them (the write
	// timeout), or 60 s.
	fmt.Fprintf(b.stderr, "stalled: waiting for the server to cut the stalled streams\n")
	deadline := time.Now().Add(60 * time.Second)
	var cut serverMem
	for time.Now().Before(deadline) && ctx.Err() == nil {
		sleepCtx(ctx, time.Second)
		if cut, err = b.metrics(ctx); err == nil && cut.streams <= before.streams {
			break
		}
	}
	close(stopSampling)
	<-sampleDone
	r.RSSPeak, r.HeapPeak, r.StreamsPeak = peak.rss, peak.heap, peak.streams-before.streams
	sleepCtx(ctx, 2*time.Second) // let the runtime hand freed memory back
	if cut, err = b.sampleMem(ctx, 3, 300*time.Millisecond); err != nil {
		return nil, err
	}
	r.RSSCut, r.StreamsCut = cut.rss, cut.streams-before.streams

	// The log after the cursor, as every client must receive it.
	want, err := b.offsetsAfter(ctx, lr.thread, cursor)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(b.stderr, "stalled: every client reads again and resumes (%s events each)\n", commas(int64(len(want))))
	t0 := time.Now()
	var slow, other, open, whole, lost atomic.Int64
	err = parallel(ctx, c.connections, 256, func(ctx context.Context, i int) error {
		ids, how := readStalled(conns[i])
		conns[i].Close()
		conns[i] = nil
		switch how {
		case "slow_consumer":
			slow.Add(1)
		case "open":
			open.Add(1)
		default:
			other.Add(1)
		}
		for len(ids) == 0 || ids[len(ids)-1] != want[len(want)-1] {
			last := cursor
			if len(ids) > 0 {
				last = tether.Offset(ids[len(ids)-1])
			}
			more, err := b.resume(ctx, lr.thread, last, tether.Offset(want[len(want)-1]))
			if err != nil {
				return err
			}
			if len(more) == 0 {
				break
			}
			ids = append(ids, more...)
		}
		if slices.Equal(ids, want) {
			whole.Add(1)
		} else {
			lost.Add(1)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.ResumeSeconds = seconds(time.Since(t0))
	r.CutSlow, r.CutOther, r.StillOpen, r.Resumed, r.Lost = slow.Load(), other.Load(), open.Load(), whole.Load(), lost.Load()
	resumed, err := b.sampleMem(ctx, 3, 300*time.Millisecond)
	if err != nil {
		return nil, err
	}
	r.RSSResumed = resumed.rss
	r.Interrupted = ctx.Err() != nil
	if r.Lost > 0 {
		return r, fmt.Errorf("%d clients did not get every event exactly once after resuming", r.Lost)
	}
	return r, nil
}

// readStalled reads what a stalled stream was sent, until the server ended
// it or nothing more comes for a second: the event ids, and how it ended
// ("slow_consumer", another reconnect reason, "closed" without one, or
// "open").
func readStalled(cn net.Conn) (ids []string, how string) {
	br := bufio.NewReaderSize(cn, 64<<10)
	how = "closed"
	for {
		_ = cn.SetReadDeadline(time.Now().Add(stalledSilence))
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			for err == bufio.ErrBufferFull {
				_, err = br.ReadSlice('\n')
			}
			continue
		}
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				how = "open"
			}
			return ids, how
		}
		switch {
		case bytes.HasPrefix(line, []byte("id: ")):
			ids = append(ids, string(bytes.TrimSpace(line[4:])))
		case bytes.HasPrefix(line, []byte("data: {\"reason\":\"slow_consumer\"")):
			how = "slow_consumer"
		}
	}
}

// resume reads the thread's stream from a cursor with Last-Event-ID, as
// a client does, until it has the event at last (or the stream ends).
func (b *bencher) resume(ctx context.Context, thread string, from, last tether.Offset) ([]string, error) {
	u := b.c.server + "/v1/threads/" + thread + "/events"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", string(from))
	if b.c.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.c.token)
	}
	resp, err := (&http.Client{Transport: b.api.streams}).Do(req)
	if err != nil {
		return nil, duringBench("resume a stream", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("resume a stream: %d", resp.StatusCode)
	}
	var ids []string
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			for err == bufio.ErrBufferFull {
				_, err = br.ReadSlice('\n')
			}
			continue
		}
		if err != nil {
			return ids, nil
		}
		if bytes.HasPrefix(line, []byte("id: ")) {
			id := string(bytes.TrimSpace(line[4:]))
			ids = append(ids, id)
			if id == string(last) {
				return ids, nil
			}
		}
		if bytes.HasPrefix(line, []byte("event: snapshot")) {
			return nil, fmt.Errorf("resume from %s: a reset snapshot", from)
		}
	}
}

// offsetsAfter reads the offsets of a thread's events after a cursor.
func (b *bencher) offsetsAfter(ctx context.Context, thread string, after tether.Offset) ([]string, error) {
	var out []string
	for {
		var page struct {
			Events []struct {
				Offset string `json:"offset"`
			} `json:"events"`
			Next     tether.Offset `json:"next_offset"`
			UpToDate bool          `json:"up_to_date"`
		}
		if _, err := b.api.call(ctx, http.MethodGet, "/v1/threads/"+thread+"/events?after="+string(after), nil, &page, "Accept", "application/json"); err != nil {
			return nil, duringBench("read the log", err)
		}
		for _, e := range page.Events {
			out = append(out, e.Offset)
		}
		if page.UpToDate {
			return out, nil
		}
		after = page.Next
	}
}

// stalledSilence is how long a stalled stream, read again, may stay silent
// before it counts as still open.
var stalledSilence = 3 * time.Second
