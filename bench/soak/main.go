// Command soak is Tether's crash-and-fault soak. It drives a real
// "tether serve" (built once, one SQLite data directory for the whole
// soak) with in-process demo runs, external workers that append with
// producer headers, and SSE clients that follow threads and runs and
// resume with Last-Event-ID after every cut; it kills the server with
// SIGKILL at random points (after a random delay, right after an
// acknowledged append, right after an acknowledged run create) and starts
// it again on the same data, round after round.
//
// After every round it checks, against the log as the restarted server
// serves it: every acknowledged append is in the log once, in order, at
// the offset its answer gave; every acknowledged run exists once; every
// client's sequence is the log's (no gap, no duplicate, no reorder, no
// reset snapshot, since a process crash loses nothing committed); every
// run has at most one run.finished and nothing after it; runs the
// server's own agents held at the kill end aborted server_restart; and no
// run stays unfinished. At the end it stops the load, lets every run end,
// and checks that each client received the whole log.
//
// It prints one line per round and a summary, and exits 1 on the first
// round with a violation, naming each one.
//
//	go run ./bench/soak -rounds 200
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}
