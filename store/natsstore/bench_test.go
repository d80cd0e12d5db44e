package natsstore_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/tetherhq/tether/store/natsstore"
	"github.com/tetherhq/tether/store/natsstore/natstest"
	"github.com/tetherhq/tether/store/storetest"
)

// BenchmarkCommit measures ingest, as sqlitestore's benchmark of the same
// name does: one goroutine per thread commits batches back to back (the
// engine keeps one batch per thread in flight), so with many threads many
// publishes are in flight together. b.N counts batches; events/s is the
// figure to watch. deploy=r3 is a three-server cluster, stream and bucket
// replicated three times, all on this machine.
func BenchmarkCommit(b *testing.B) {
	for _, deploy := range []string{"single", "r3"} {
		b.Run("deploy="+deploy, func(b *testing.B) {
			var opts natsstore.Options
			if deploy == "single" {
				opts = optionsFor(natstest.StartServer(b).ClientURL(), "", 1)
			} else {
				opts = optionsFor(natstest.URLs(natstest.StartCluster(b, 3)...), "", 3)
			}
			for _, threads := range []int{1, 100} {
				for _, events := range []int{1, 10} {
					b.Run(fmt.Sprintf("threads=%d/events=%d", threads, events), func(b *testing.B) {
						benchCommit(b, opts, threads, events)
					})
				}
			}
		})
	}
}

// benchStreams numbers the streams of the benchmarks, one per run.
var benchStreams atomic.Int64

func benchCommit(b *testing.B, opts natsstore.Options, threads, events int) {
	n := benchStreams.Add(1)
	opts.Stream, opts.Subject = fmt.Sprintf("%s_%d", opts.Stream, n), fmt.Sprintf("b%d.log", n)
	s := openStore(b, opts)
	defer s.Close()
	storetest.BenchCommit(b, s, threads, events, false)
}
