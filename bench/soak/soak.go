package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// run is the whole soak; out gets its report.
func run(ctx context.Context, args []string, out io.Writer) error {
	opts, err := parseOptions(args, out)
	if err != nil {
		return err
	}
	if opts.seed == 0 {
		opts.seed = uint64(time.Now().UnixNano())
	}
	rng := rand.New(rand.NewPCG(opts.seed, 1))
	dir, err := os.MkdirTemp("", "tether-soak-")
	if err != nil {
		return err
	}
	if opts.keep {
		fmt.Fprintf(out, "data and server log kept in %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if opts.bin == "" {
		if opts.bin, err = build(ctx, dir); err != nil {
			return err
		}
	}
	addr, err := freePort()
	if err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	debugAddr, err := freePort()
	if err != nil {
		return err
	}
	srv := &server{bin: opts.bin, data: filepath.Join(dir, "data"), addr: addr, url: "http://" + addr, log: logf,
		debug: "http://" + debugAddr,
		flags: []string{"--lease-ttl", opts.leaseTTL.String(), "--sweep-interval", "200ms", "--log-level", "warn", "--debug-addr", debugAddr}}
	defer srv.kill()
	if _, err := srv.start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "soak: %d rounds, seed %d, %d demo threads, %d workers, %d clients per thread, lease TTL %s, server up %s–%s per round\n",
		opts.rounds, opts.seed, opts.demo, opts.workers, opts.followers, opts.leaseTTL, opts.minUp, opts.maxUp)

	w := newWorld(srv)
	c := newChecker(w, srv.url, opts)
	if c.epoch, err = markEpoch(ctx, srv.url); err != nil {
		return err
	}
	for i := range opts.demo {
		w.threads = append(w.threads, fmt.Sprintf("soak-d%d", i))
	}
	for i := range opts.workers {
		w.threads = append(w.threads, fmt.Sprintf("soak-x%d", i))
	}
	for _, th := range w.threads {
		if a := call(ctx, "POST", srv.url+"/v1/threads", []byte(`{"id":"`+th+`"}`)); a.status != 201 && a.status != 200 {
			return fmt.Errorf("create thread %s: %d %v %s", th, a.status, a.err, a.body)
		}
	}

	// The load: traffic ends when the soak drains it; clients when the
	// soak is over.
	trafficCtx, stopTraffic := context.WithCancel(ctx)
	defer stopTraffic()
	clientsCtx, stopClients := context.WithCancel(ctx)
	defer stopClients()
	t := &traffic{w: w, url: srv.url, opts: opts}
	var load, clients sync.WaitGroup
	for i := range opts.demo {
		r := rand.New(rand.NewPCG(rng.Uint64(), 2))
		load.Go(func() { t.demo(trafficCtx, i, r) })
	}
	for i := range opts.workers {
		r := rand.New(rand.NewPCG(rng.Uint64(), 3))
		load.Go(func() { t.worker(trafficCtx, i, r) })
	}
	for _, th := range w.threads {
		for range opts.followers {
			s := rng.Uint64()
			clients.Go(func() { w.follow(clientsCtx, srv.url, "/v1/threads/"+th+"/events", th, "", s) })
		}
	}

	faults := map[string]int{}
	t0 := time.Now()
	var total int
	for round := 1; round <= opts.rounds; round++ {
		up := opts.minUp + time.Duration(rng.Int64N(int64(opts.maxUp-opts.minUp)+1))
		fault := "at a random time"
		switch rng.IntN(4) {
		case 2:
			fault = faultAppend
		case 3:
			fault = faultCreate
		}
		if fault == "at a random time" {
			if !pause(ctx, up) {
				return ctx.Err()
			}
			srv.kill()
		} else {
			if !pause(ctx, opts.minUp) {
				return ctx.Err()
			}
			w.armed.Store(fault)
			select {
			case <-w.killedBy:
			case <-time.After(up + 3*time.Second):
				w.armed.Store("")
				srv.kill()
				fault = "at a random time (no acknowledgement came)"
			case <-ctx.Done():
				return ctx.Err()
			}
			select {
			case <-w.killedBy:
			default:
			}
		}
		faults[fault]++
		restart, err := srv.start(ctx)
		if err != nil {
			return err
		}
		if c.epoch, err = markEpoch(ctx, srv.url); err != nil {
			return err
		}
		bad, n := c.round(ctx, round%20 == 0, false)
		fmt.Fprintf(out, "round %3d/%d  SIGKILL %-44s  back in %4dms  log %7d events (+%d)  %s\n",
			round, opts.rounds, fault, restart.Milliseconds(), n, n-total, c.summary())
		total = n
		if len(bad) > 0 {
			return report(out, srv, bad, round, dir, opts)
		}
	}

	// The end: no new runs; every run must end; every client must get the
	// whole log.
	fmt.Fprintf(out, "draining: no new runs; waiting for every run to end and every client to catch up\n")
	t.draining.Store(true)
	done := make(chan struct{})
	go func() { load.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2*opts.leaseTTL + 60*time.Second):
		stopTraffic()
		<-done
	}
	deadline := time.Now().Add(opts.leaseTTL + 30*time.Second)
	var bad []string
	var n int
	for {
		bad, n = c.round(ctx, true, true)
		if len(bad) == 0 || time.Now().After(deadline) {
			break
		}
		if !pause(ctx, 500*time.Millisecond) {
			return ctx.Err()
		}
	}
	stopClients()
	clients.Wait()
	stopErr := srv.stop()
	fmt.Fprintf(out, "final: log %d events  %s; slowest read of a log page %s\n", n, c.summary(), c.slowest.Round(time.Millisecond))
	st := &w.stats
	fmt.Fprintf(out, "soak: %d rounds in %s; faults: ", opts.rounds, time.Since(t0).Round(time.Second))
	var fs []string
	for f, k := range faults {
		fs = append(fs, fmt.Sprintf("SIGKILL %s ×%d", f, k))
	}
	fmt.Fprintf(out, "%s; %s left by their worker; %d client hang-ups\n", strings.Join(fs, ", "), plural(st.abandoned.Load(), "run"), st.cuts.Load())
	fmt.Fprintf(out, "soak: %d appends acknowledged (%d as duplicates of a retried append), %d append retries, %d runs created (%d create retries), %d lease_lost answers, %d client resumes\n",
		st.appendsAcked.Load(), st.duplicates.Load(), st.appendRetries.Load(), st.createsAcked.Load(), st.createRetries.Load(), st.leaseLost.Load(), st.resumes.Load())
	if len(bad) > 0 {
		return report(out, srv, bad, opts.rounds, dir, opts)
	}
	if stopErr != nil {
		return stopErr
	}
	fmt.Fprintf(out, "soak: PASS: no acknowledged event lost, duplicated or out of place; every client saw the log; every run ended once\n")
	return nil
}

// round refreshes the logs and checks them; it also returns the number
// of events in all logs. Checks that fail because of a race with the
// restart's own recovery (runs it is still aborting) are taken again a
// few times before they count.
func (c *checker) round(ctx context.Context, full, final bool) ([]string, int) {
	var bad []string
	for try := 0; try < 10; try++ {
		if try > 0 && !pause(ctx, 300*time.Millisecond) {
			break
		}
		snap := c.w.snapshot()
		bad = c.refresh(ctx, full)
		if len(bad) == 0 {
			bad = c.check(final, snap)
		}
		if len(bad) == 0 || final {
			break
		}
		// Traffic violations are final; others may be the restart's
		// recovery still under way.
		if !onlyRecovery(bad) {
			break
		}
	}
	n := 0
	for _, tl := range c.logs {
		n += len(tl.entries)
	}
	return bad, n
}

func onlyRecovery(bad []string) bool {
	for _, b := range bad {
		if !strings.Contains(b, "is not ended after the restart") {
			return false
		}
	}
	return true
}

func (c *checker) summary() string {
	var parts []string
	for k, n := range c.ended {
		parts = append(parts, fmt.Sprintf("%s %d", k, n))
	}
	sortStrings(parts)
	st := &c.w.stats
	return fmt.Sprintf("appends %d  runs ended: %s", st.appendsAcked.Load(), strings.Join(parts, ", "))
}

func report(out io.Writer, srv *server, bad []string, round int, dir string, opts *options) error {
	fmt.Fprintf(out, "\nVIOLATIONS after round %d (seed %d):\n", round, opts.seed)
	// The server's goroutines as the violation was seen: where a hang
	// waits.
	if a := callWith(context.Background(), checkClient, "GET", srv.debug+"/debug/pprof/goroutine?debug=2", nil); a.err == nil && a.status == 200 {
		name := filepath.Join(dir, "goroutines.txt")
		if err := os.WriteFile(name, a.body, 0o644); err == nil {
			fmt.Fprintf(out, "(the server's goroutines then: %s)\n", name)
		}
	}
	for _, b := range bad {
		fmt.Fprintf(out, "  - %s\n", b)
	}
	if !opts.keep {
		fmt.Fprintf(out, "(run with -keep -seed %d to keep the data directory and the server's log)\n", opts.seed)
	}
	return errors.New("violations found")
}

// markEpoch learns the epoch of the server now running: every event it
// writes has it, and events of the servers before it a smaller one.
func markEpoch(ctx context.Context, url string) (uint64, error) {
	a := call(ctx, "PUT", url+"/v1/stream/soak-epochs", nil, "Content-Type", "application/octet-stream")
	if a.err != nil || a.status >= 300 {
		return 0, fmt.Errorf("create the epoch stream: %d %v %s", a.status, a.err, a.body)
	}
	a = call(ctx, "POST", url+"/v1/stream/soak-epochs", []byte("x"), "Content-Type", "application/octet-stream")
	if a.err != nil || a.status >= 300 {
		return 0, fmt.Errorf("append to the epoch stream: %d %v %s", a.status, a.err, a.body)
	}
	return epochOf(a.header.Get("Stream-Next-Offset")), nil
}
