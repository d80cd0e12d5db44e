package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// idleResult is the outcome of the idle scenario.
type idleResult struct {
	Scenario     string  `json:"scenario"`
	Transport    string  `json:"transport"` // sse or ws
	Connections  int     `json:"connections"`
	Seconds      float64 `json:"seconds"`
	Streams      float64 `json:"server_streams"` // tether_sse_streams (ws: tether_ws_connections) while held, minus before
	RSSBefore    float64 `json:"rss_before_bytes"`
	RSSAfter     float64 `json:"rss_after_bytes"`
	BytesPerConn float64 `json:"rss_bytes_per_connection"`
	HeapPerConn  float64 `json:"heap_inuse_bytes_per_connection"`
	StackPerConn float64 `json:"stack_inuse_bytes_per_connection"`
	GoroutinesPC float64 `json:"goroutines_per_connection"`
	Note         string  `json:"note,omitempty"`
	Interrupted  bool    `json:"interrupted,omitempty"`
}

func (r *idleResult) name() string {
	what := "SSE connection(s)"
	if r.Transport == "ws" {
		what = "WebSocket(s), one subscription each,"
	}
	return interrupted(fmt.Sprintf("idle: %s %s to one thread, server memory from /metrics", commas(int64(r.Connections)), what), r.Interrupted)
}

func (r *idleResult) rows() [][2]string {
	rows := [][2]string{
		{"streams open on the server", commas(int64(r.Streams))},
		{"resident memory", fmt.Sprintf("%s before, %s with the connections", fmtBytes(r.RSSBefore), fmtBytes(r.RSSAfter))},
		{"resident bytes per connection", fmt.Sprintf("%s (%.1f KiB)", commas(int64(r.BytesPerConn)), r.BytesPerConn/1024)},
		{"of which Go heap in use", fmt.Sprintf("%s B", commas(int64(r.HeapPerConn)))},
		{"of which goroutine stacks", fmt.Sprintf("%s B", commas(int64(r.StackPerConn)))},
		{"goroutines per connection", strconv.FormatFloat(r.GoroutinesPC, 'f', 2, 64)},
	}
	if r.Note != "" {
		rows = append(rows, [2]string{"note", r.Note})
	}
	return rows
}

// serverMem is what /metrics says about the server's memory.
type serverMem struct {
	rss, heap, stack, goroutines, streams, sockets, cpu float64
	// sys is all the Go runtime mapped, released what it gave back to the
	// OS: sys - released is the Go runtime's part of rss, about.
	sys, released float64
	hasCPU        bool // process_cpu_seconds_total was there
}

// metrics reads the server's memory figures from GET /metrics.
func (b *bencher) metrics(ctx context.Context) (serverMem, error) {
	p, err := b.api.prepare(http.MethodGet, "/metrics")
	if err != nil {
		return serverMem{}, err
	}
	var buf bytes.Buffer
	status, err := b.api.send(ctx, p, nil, &buf)
	if err != nil {
		return serverMem{}, duringBench("read /metrics", err)
	}
	if status != http.StatusOK {
		return serverMem{}, duringBench("read /metrics", serverErr(status, buf.Bytes()))
	}
	var m serverMem
	found := map[string]*float64{
		"process_resident_memory_bytes":   &m.rss,
		"go_memstats_heap_inuse_bytes":    &m.heap,
		"go_memstats_stack_inuse_bytes":   &m.stack,
		"go_goroutines":                   &m.goroutines,
		"tether_sse_streams":              &m.streams,
		"tether_ws_connections":           &m.sockets,
		"process_cpu_seconds_total":       &m.cpu,
		"go_memstats_sys_bytes":           &m.sys,
		"go_memstats_heap_released_bytes": &m.released,
	}
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if dst := found[name]; ok && dst != nil {
			if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
				*dst = v
				m.hasCPU = m.hasCPU || dst == &m.cpu
			}
		}
	}
	if m.rss == 0 {
		return m, fmt.Errorf("/metrics has no process_resident_memory_bytes (the server's OS does not report it)")
	}
	return m, nil
}

// sampleMem reads the metrics n times, interval apart, and returns the
// median of each figure.
func (b *bencher) sampleMem(ctx context.Context, n int, interval time.Duration) (serverMem, error) {
	var all []serverMem
	for i := range n {
		if i > 0 {
			sleepCtx(ctx, interval)
		}
		m, err := b.metrics(ctx)
		if err != nil {
			return m, err
		}
		all = append(all, m)
	}
	med := func(f func(serverMem) float64) float64 {
		v := make([]float64, len(all))
		for i, m := range all {
			v[i] = f(m)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return serverMem{
		rss:        med(func(m serverMem) float64 { return m.rss }),
		heap:       med(func(m serverMem) float64 { return m.heap }),
		stack:      med(func(m serverMem) float64 { return m.stack }),
		goroutines: med(func(m serverMem) float64 { return m.goroutines }),
		streams:    med(func(m serverMem) float64 { return m.streams }),
		sockets:    med(func(m serverMem) float64 { return m.sockets }),
		sys:        med(func(m serverMem) float64 { return m.sys }),
		released:   med(func(m serverMem) float64 { return m.released }),
	}, nil
}

// idleScenario measures the server's memory per idle SSE connection. The
// connections are raw TCP (one request written by hand, then never read),
// so that the bench holds thousands with no goroutine each.
func (b *bencher) idleScenario(ctx context.Context) (result, error) {
	c := b.c
	limit, err := raiseFileLimit(uint64(c.connections) + 256)
	if err != nil {
		return nil, err
	}
	if limit < uint64(c.connections)+64 {
		return nil, fmt.Errorf("--connections %d needs more open files than this process may have (%d): raise ulimit -n", c.connections, limit)
	}
	sources, err := b.sourceAddrs(c.connections)
	if err != nil {
		return nil, err
	}
	if len(sources) > 1 {
		fmt.Fprintf(b.stderr, "idle: dialing from %d source addresses (%s to %s)\n", len(sources), sources[0], sources[len(sources)-1])
	}
	tid, err := b.newThread(ctx)
	if err != nil {
		return nil, err
	}
	path := "/v1/threads/" + tid + "/events?after=now"
	fmt.Fprintf(b.stderr, "idle: reading the server's memory before\n")
	before, err := b.sampleMem(ctx, 3, 300*time.Millisecond)
	if err != nil {
		return nil, err
	}

	fmt.Fprintf(b.stderr, "idle: opening %s connection(s)\n", commas(int64(c.connections)))
	conns := make([]io.Closer, c.connections)
	defer func() {
		for _, cn := range conns {
			if cn != nil {
				cn.Close()
			}
		}
	}()
	var opened atomic.Int64
	stop := make(chan struct{})
	go b.progress(stop, func(el time.Duration) string {
		return fmt.Sprintf("idle %4s  %s of %s connections open", el, commas(opened.Load()), commas(int64(c.connections)))
	})
	var hc *http.Client
	if c.transport == "ws" {
		hc = socketClient()
	}
	var mu sync.Mutex
	err = parallel(ctx, c.connections, 32, func(ctx context.Context, i int) error {
		var src net.IP
		if len(sources) > 0 {
			src = sources[i%len(sources)]
		}
		var cn io.Closer
		var err error
		if c.transport == "ws" {
			cn, err = b.dialSocketFrom(ctx, hc, tid, src)
		} else {
			cn, err = b.dialStreamFrom(ctx, path, src)
		}
		if err != nil {
			return duringBench(fmt.Sprintf("open connection %d", i+1), err)
		}
		mu.Lock()
		conns[i] = cn
		mu.Unlock()
		opened.Add(1)
		return nil
	})
	if err != nil {
		close(stop)
		return nil, err
	}

	// Hold them; read the memory in the second half of the hold.
	start := time.Now()
	settle := c.duration / 2
	sleepCtx(ctx, settle)
	samples := max(int((c.duration-settle)/time.Second), 1)
	sctx := ctx
	if ctx.Err() != nil {
		// Interrupted: one sample, for the summary so far.
		samples, sctx = 1, context.Background()
	}
	after, err := b.sampleMem(sctx, samples, time.Second)
	close(stop)
	if err != nil {
		return nil, err
	}
	n := float64(c.connections)
	r := &idleResult{
		Scenario: "idle", Transport: c.transport, Connections: c.connections, Seconds: seconds(time.Since(start)),
		Streams:   after.streams - before.streams,
		RSSBefore: before.rss, RSSAfter: after.rss, BytesPerConn: (after.rss - before.rss) / n,
		HeapPerConn: (after.heap - before.heap) / n, StackPerConn: (after.stack - before.stack) / n,
		GoroutinesPC: (after.goroutines - before.goroutines) / n,
		Interrupted:  ctx.Err() != nil,
	}
	if c.transport == "ws" {
		r.Streams = after.sockets - before.sockets
	}
	if r.BytesPerConn < (r.HeapPerConn+r.StackPerConn)/2 || r.HeapPerConn < 0 {
		// The Go runtime reuses memory freed by earlier work before it
		// asks the OS for more: resident memory then hardly moves.
		r.Note = "resident memory and the Go heap moved inconsistently: the server reused memory freed by earlier work, or collected garbage meanwhile; run idle on a fresh server"
	}
	return r, nil
}

// dialStream opens an SSE stream on a raw connection and returns once the
// server sent its connected frame. The caller never reads it again: an
// idle stream gets a ping every 15 s, which the socket buffers hold.
func (b *bencher) dialStream(ctx context.Context, path string) (net.Conn, error) {
	return b.dialStreamFrom(ctx, path, nil)
}

// dialStreamFrom is dialStream from a local address (nil: any).
func (b *bencher) dialStreamFrom(ctx context.Context, path string, local net.IP) (net.Conn, error) {
	u, err := url.Parse(b.c.server)
	if err != nil {
		return nil, err
	}
	cn, err := b.api.dialFrom(ctx, u, local)
	if err != nil {
		return nil, err
	}
	var req strings.Builder
	fmt.Fprintf(&req, "GET %s%s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n", u.Path, path, u.Host)
	if b.c.token != "" {
		fmt.Fprintf(&req, "Authorization: Bearer %s\r\n", b.c.token)
	}
	req.WriteString("\r\n")
	_ = cn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := cn.Write([]byte(req.String())); err != nil {
		cn.Close()
		return nil, b.api.transportErr(err)
	}
	var got []byte
	buf := make([]byte, 4096)
	for {
		k, err := cn.Read(buf)
		got = append(got, buf[:k]...)
		if i := bytes.Index(got, []byte("event: connected")); i >= 0 && bytes.Contains(got[i:], []byte("\n\n")) {
			break
		}
		if bytes.Contains(got, []byte("\r\n\r\n")) && !bytes.HasPrefix(got, []byte("HTTP/1.1 200")) {
			if k == 0 || bytes.HasSuffix(got, []byte("}\n")) || bytes.HasSuffix(got, []byte("\r\n\r\n")) {
				cn.Close()
				return nil, streamRefused(got)
			}
		}
		if err != nil || len(got) > 64<<10 {
			cn.Close()
			if !bytes.HasPrefix(got, []byte("HTTP/1.1 200")) {
				return nil, streamRefused(got)
			}
			return nil, b.api.transportErr(err)
		}
	}
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 200")) {
		cn.Close()
		return nil, streamRefused(got)
	}
	_ = cn.SetDeadline(time.Time{})
	return cn, nil
}

// streamRefused is the error of a stream request the server answered with
// something else than 200.
func streamRefused(resp []byte) error {
	line, _, _ := bytes.Cut(resp, []byte("\r\n"))
	if len(line) == 0 {
		return fmt.Errorf("the server closed the connection without answering")
	}
	status := 0
	if f := bytes.Fields(line); len(f) >= 2 {
		status, _ = strconv.Atoi(string(f[1]))
	}
	if _, body, ok := bytes.Cut(resp, []byte("\r\n\r\n")); ok {
		i, j := bytes.IndexByte(body, '{'), bytes.LastIndexByte(body, '}')
		if i >= 0 && j > i {
			return serverErr(status, body[i:j+1])
		}
	}
	return fmt.Errorf("the server answered %s", line)
}

// portsPerSource is how many connections the bench opens to one server
// from one source address: a little under the Linux default range of
// ephemeral ports (32768-60999, net.ipv4.ip_local_port_range).
const portsPerSource = 25000

// sourceAddrs returns the local addresses to spread n connections over:
// --source-addrs if given; else, for a server on 127.0.0.1 and more
// connections than one address has ports for, 127.0.0.1, 127.0.0.2, ...
// (every 127.x address is the machine's own on Linux); else none (the
// system's choice).
func (b *bencher) sourceAddrs(n int) ([]net.IP, error) {
	if b.c.sourceAddrs != "" {
		var out []net.IP
		for _, s := range strings.Split(b.c.sourceAddrs, ",") {
			ip := net.ParseIP(strings.TrimSpace(s))
			if ip == nil {
				return nil, fmt.Errorf("--source-addrs: %q is not an IP address", s)
			}
			out = append(out, ip)
		}
		return out, nil
	}
	u, err := url.Parse(b.c.server)
	if err != nil || n <= portsPerSource {
		return nil, nil
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.Equal(net.IPv4(127, 0, 0, 1)) {
		return nil, nil
	}
	k := (n + portsPerSource - 1) / portsPerSource
	if k > 254 {
		return nil, fmt.Errorf("--connections %d needs more than 254 source addresses", n)
	}
	out := make([]net.IP, k)
	for i := range out {
		out[i] = net.IPv4(127, 0, 0, byte(i+1))
	}
	return out, nil
}
