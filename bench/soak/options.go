package main

import (
	"flag"
	"io"
	"time"
)

// options are the soak's flags.
type options struct {
	bin        string
	rounds     int
	minUp      time.Duration
	maxUp      time.Duration
	demo       int
	workers    int
	followers  int
	leaseTTL   time.Duration
	seed       uint64
	keep       bool
	verbose    bool
	stuckAfter time.Duration
}

func parseOptions(args []string, out io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.bin, "bin", "", "tether binary to run (default: build ./cmd/tether once into a temporary directory)")
	fs.IntVar(&o.rounds, "rounds", 60, "kill rounds (each SIGKILLs the server once and starts it again)")
	fs.DurationVar(&o.minUp, "min-up", 300*time.Millisecond, "shortest time the server runs in a round before the kill")
	fs.DurationVar(&o.maxUp, "max-up", 2500*time.Millisecond, "longest time the server runs in a round before the kill")
	fs.IntVar(&o.demo, "demo", 4, "threads with in-process demo runs, one after another")
	fs.IntVar(&o.workers, "workers", 3, "external workers, each with its own thread and agent")
	fs.IntVar(&o.followers, "followers", 2, "SSE clients following each thread (and one following each run)")
	fs.DurationVar(&o.leaseTTL, "lease-ttl", 3*time.Second, "the server's --lease-ttl")
	fs.Uint64Var(&o.seed, "seed", 0, "random seed (0: from the clock); printed, so a soak can be repeated")
	fs.BoolVar(&o.keep, "keep", false, "keep the data directory and the server's log")
	fs.BoolVar(&o.verbose, "v", false, "print every fault as it is injected")
	fs.DurationVar(&o.stuckAfter, "stuck-after", 45*time.Second, "a run not finished this long after it was created is stuck")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return o, nil
}
