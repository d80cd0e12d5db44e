package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// benchConfig is what tether bench was asked to do.
type benchConfig struct {
	server, token, scenario, kind, cpuprofile string
	threads, concurrency, batch, subscribers  int
	rate, connections, eventBytes, window     int
	events                                    int
	duration                                  time.Duration
	json                                      bool
	// runs (bench_runs.go)
	runs, runSubscribers, tokens, delayMs int
	settle                                time.Duration
	sourceAddrs, transport                string // idle
	// resume (bench_resume.go)
	history    []int
	rounds     int
	resumeData string
}

// scenarios are the load scenarios, in the order "all" runs them: idle
// first, since it reads the server's resident memory, which work done
// before leaves high.
var scenarios = []string{"idle", "append", "fanout", "latency"}

// extraScenarios run only when asked for by name; resume starts a server
// of its own.
var extraScenarios = []string{"stalled", "resume", "runs"}

func benchCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", "bench [flags]", env, stderr)
	var c benchConfig
	fs.StringVar(&c.server, "server", fs.envOr("TETHER_SERVER", "http://127.0.0.1:8080"), "URL of the Tether server ($TETHER_SERVER)")
	fs.SecretVar(&c.token, "token", "TETHER_TOKEN", "API token (admin, or one that may act as client and worker), sent as Authorization: Bearer")
	fs.StringVar(&c.scenario, "scenario", fs.envOr("TETHER_BENCH_SCENARIO", "append"), "append, fanout, latency, idle, or all (each in turn, idle first); also stalled, runs (in-process demo runs at once), and resume, which runs a server of its own and ignores --server ($TETHER_BENCH_SCENARIO)")
	threads := fs.Int("threads", "TETHER_BENCH_THREADS", 1, "append: threads appended to, each with one run")
	concurrency := fs.Int("concurrency", "TETHER_BENCH_CONCURRENCY", 0, "requests in flight: append: spread over the threads (default: the number of threads, at least 16); fanout: of the one producer (default 1)")
	batch := fs.Int("batch", "TETHER_BENCH_BATCH", 10, "append, fanout, stalled: events per append request")
	duration := fs.Duration("duration", "TETHER_BENCH_DURATION", 10*time.Second, "how long each scenario appends (idle: how long the connections are held)")
	subscribers := fs.Int("subscribers", "TETHER_BENCH_SUBSCRIBERS", 100, "fanout: SSE subscribers of the thread")
	window := fs.Int("window", "TETHER_BENCH_WINDOW", 1000, "fanout: the producer stays at most this many events ahead of the slowest subscriber, so that no one is cut as a slow consumer; 0 for no limit")
	rate := fs.Int("rate", "TETHER_BENCH_RATE", 10000, "latency: events per second, sent in a batch every millisecond")
	connections := fs.Int("connections", "TETHER_BENCH_CONNECTIONS", 1000, "idle, stalled: connections to hold open (idle: SSE streams, or WebSockets with --transport ws)")
	events := fs.Int("events", "TETHER_BENCH_EVENTS", 20000, "stalled: events appended while the connections do not read")
	eventBytes := fs.Int("event-bytes", "TETHER_BENCH_EVENT_BYTES", 32, "bytes of text in each event (the delta, or the message's text)")
	fs.StringVar(&c.kind, "kind", fs.envOr("TETHER_BENCH_KIND", "delta"), "append: delta (text.delta events into one started message per run) or message (complete message.created events) ($TETHER_BENCH_KIND)")
	history := fs.envOr("TETHER_BENCH_HISTORY", "1000,1000000")
	fs.StringVar(&history, "history", history, "resume: events in the threads resumed, comma-separated ($TETHER_BENCH_HISTORY)")
	rounds := fs.Int("rounds", "TETHER_BENCH_ROUNDS", 5, "resume: server restarts per thread and request")
	fs.StringVar(&c.resumeData, "resume-data", fs.envOr("TETHER_BENCH_RESUME_DATA", ""), "resume: data directory of its server, kept, so that a later run skips the fill (default: a temporary one) ($TETHER_BENCH_RESUME_DATA)")
	runs := fs.Int("runs", "TETHER_BENCH_RUNS", 1000, "runs: demo runs created at once, each on a thread of its own")
	runSubscribers := fs.Int("run-subscribers", "TETHER_BENCH_RUN_SUBSCRIBERS", 2, "runs: SSE subscribers of each run's thread")
	tokens := fs.Int("tokens", "TETHER_BENCH_TOKENS", 300, "runs: text.delta events of each demo run")
	delayMs := fs.Int("delay-ms", "TETHER_BENCH_DELAY_MS", 33, "runs: the demo agent's pause before each event, in ms")
	settle := fs.Duration("settle", "TETHER_BENCH_SETTLE", 90*time.Second, "runs: how long the server is left idle after the runs before its memory is read again (streams whose clients left end at the second ping after, two heartbeats)")
	fs.StringVar(&c.sourceAddrs, "source-addrs", fs.envOr("TETHER_BENCH_SOURCE_ADDRS", ""), "idle: comma-separated local addresses to open connections from, in turn (default: for a server on 127.0.0.1, 127.0.0.1, 127.0.0.2, ... one per 25,000 connections, past the ephemeral ports of one address) ($TETHER_BENCH_SOURCE_ADDRS)")
	fs.StringVar(&c.transport, "transport", fs.envOr("TETHER_BENCH_TRANSPORT", "sse"), "idle: what each connection is: sse (an SSE stream) or ws (a WebSocket with one subscription) ($TETHER_BENCH_TRANSPORT)")
	jsonOut := fs.Bool("json", "TETHER_JSON", false, "print the summary as JSON")
	fs.StringVar(&c.cpuprofile, "cpuprofile", fs.envOr("TETHER_BENCH_CPUPROFILE", ""), "write a CPU profile of the load generator itself to this file ($TETHER_BENCH_CPUPROFILE)")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tether bench: unexpected argument %q\n", fs.Arg(0))
		return errUsage
	}
	c.threads, c.concurrency, c.batch, c.duration = *threads, *concurrency, *batch, *duration
	c.subscribers, c.window, c.rate, c.connections, c.eventBytes = *subscribers, *window, *rate, *connections, *eventBytes
	c.events = *events
	c.runs, c.runSubscribers, c.tokens, c.delayMs, c.settle = *runs, *runSubscribers, *tokens, *delayMs, *settle
	c.json = *jsonOut
	c.rounds = *rounds
	for _, h := range strings.Split(history, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(h))
		if err != nil || n < 20 {
			return fmt.Errorf("--history must be a list of numbers of events, each at least 20, not %q", history)
		}
		c.history = append(c.history, n)
	}
	if err := c.check(); err != nil {
		return err
	}

	if c.cpuprofile != "" {
		f, err := os.Create(c.cpuprofile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	list := []string{c.scenario}
	if c.scenario == "all" {
		list = scenarios
	}
	b := newBencher(c, stderr)
	defer b.close()
	var results []result
	var err error
	for _, name := range list {
		if ctx.Err() != nil {
			break
		}
		var r result
		r, err = b.run(ctx, name)
		if r != nil {
			results = append(results, r)
		}
		if err != nil {
			break
		}
	}
	if len(results) > 0 {
		if werr := writeSummary(stdout, c, results); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

func (c *benchConfig) check() error {
	if c.scenario != "all" && !slices.Contains(scenarios, c.scenario) && !slices.Contains(extraScenarios, c.scenario) {
		return fmt.Errorf("--scenario must be one of %s or all, or %s, not %q", strings.Join(scenarios, ", "), strings.Join(extraScenarios, ", "), c.scenario)
	}
	if c.rounds < 1 {
		return errors.New("--rounds must be at least 1")
	}
	if c.transport != "sse" && c.transport != "ws" {
		return fmt.Errorf("--transport must be sse or ws, not %q", c.transport)
	}
	if c.kind != "delta" && c.kind != "message" {
		return fmt.Errorf("--kind must be delta or message, not %q", c.kind)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"threads", c.threads}, {"batch", c.batch}, {"subscribers", c.subscribers},
		{"rate", c.rate}, {"connections", c.connections}, {"event-bytes", c.eventBytes}, {"events", c.events},
		{"runs", c.runs}, {"run-subscribers", c.runSubscribers}, {"tokens", c.tokens}} {
		if f.v < 1 {
			return fmt.Errorf("--%s must be at least 1", f.name)
		}
	}
	if c.concurrency < 0 {
		return errors.New("--concurrency must not be negative")
	}
	if c.delayMs < 0 || c.settle < 0 {
		return errors.New("--delay-ms and --settle must not be negative")
	}
	if c.window < 0 {
		return errors.New("--window must not be negative")
	}
	if c.duration <= 0 {
		return errors.New("--duration must be positive")
	}
	if !strings.HasPrefix(c.server, "http://") && !strings.HasPrefix(c.server, "https://") {
		return fmt.Errorf("--server must be an http:// or https:// URL, not %q", c.server)
	}
	c.server = strings.TrimRight(c.server, "/")
	return nil
}

// concurrencyFor is --concurrency, or its default for a scenario.
func (c *benchConfig) concurrencyFor(scenario string) int {
	switch {
	case c.concurrency > 0:
		return c.concurrency
	case scenario == "append":
		return max(c.threads, 16)
	}
	return 1
}

// A result is the outcome of one scenario: rows for the table, fields for
// the JSON.
type result interface {
	name() string
	rows() [][2]string
}

// interrupted is a result's name, marked when the scenario was cut short.
func interrupted(name string, cut bool) string {
	if cut {
		return name + " (interrupted)"
	}
	return name
}

// bencher runs scenarios against one server.
type bencher struct {
	c      benchConfig
	api    *apiClient
	stderr io.Writer
	runID  string        // names what this bench creates, so that two benches do not mix
	seq    *atomic.Int64 // shared by the copies run makes
}

func newBencher(c benchConfig, stderr io.Writer) *bencher {
	return &bencher{
		c:      c,
		api:    newAPIClient(c.server, c.token, max(c.concurrencyFor("append"), c.concurrency)+8),
		stderr: stderr,
		runID:  fmt.Sprintf("%x", time.Now().UnixNano()&0xffffffffff),
		seq:    new(atomic.Int64),
	}
}

func (b *bencher) close() { b.api.close() }

// run runs one scenario. Ctrl-C (ctx) ends it early with the results so
// far.
func (b *bencher) run(ctx context.Context, name string) (result, error) {
	if name == "resume" {
		return b.resumeScenario(ctx)
	}
	if err := b.api.ping(ctx); err != nil {
		return nil, duringBench("check the server (GET /healthz)", err)
	}
	bb := *b
	bb.c.concurrency = b.c.concurrencyFor(name)
	b = &bb
	switch name {
	case "append":
		return b.appendScenario(ctx)
	case "fanout":
		return b.fanoutScenario(ctx)
	case "latency":
		return b.latencyScenario(ctx)
	case "idle":
		return b.idleScenario(ctx)
	case "stalled":
		return b.stalledScenario(ctx)
	case "runs":
		return b.runsScenario(ctx)
	}
	return nil, fmt.Errorf("unknown scenario %q", name)
}

// progress prints one line on stderr every second until stop is closed.
func (b *bencher) progress(stop <-chan struct{}, line func(elapsed time.Duration) string) {
	start := time.Now()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			fmt.Fprintln(b.stderr, line(now.Sub(start).Round(time.Second)))
		}
	}
}

// writeSummary prints the results as a table, or as JSON with --json.
func writeSummary(w io.Writer, c benchConfig, results []result) error {
	if c.json {
		out := struct {
			Server  string   `json:"server"`
			Results []result `json:"results"`
		}{c.server, results}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	var sb strings.Builder
	for i, r := range results {
		if i > 0 {
			sb.WriteByte('\n')
		}
		rows := r.rows()
		width := 0
		for _, row := range rows {
			width = max(width, len(row[0]))
		}
		fmt.Fprintf(&sb, "%s\n", r.name())
		for _, row := range rows {
			fmt.Fprintf(&sb, "  %-*s  %s\n", width, row[0], row[1])
		}
	}
	_, err := io.WriteString(w, sb.String())
	return err
}
