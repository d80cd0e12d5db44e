package sqlitestore_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/tetherhq/tether/store/sqlitestore"
	"github.com/tetherhq/tether/store/storetest"
)

// BenchmarkCommit measures ingest (storetest.BenchCommit), with and
// without fsync: with many threads the writer's group commit shares each
// transaction, and each fsync, among them.
func BenchmarkCommit(b *testing.B) {
	for _, threads := range []int{1, 100} {
		for _, events := range []int{1, 10} {
			for _, fsync := range []bool{false, true} {
				name := fmt.Sprintf("threads=%d/events=%d/fsync=%v", threads, events, fsync)
				b.Run(name, func(b *testing.B) { benchCommit(b, threads, events, fsync, false) })
			}
			// A producer's appends (a worker's, an in-process run's) also
			// move the producer's state.
			name := fmt.Sprintf("threads=%d/events=%d/fsync=false/producer", threads, events)
			b.Run(name, func(b *testing.B) { benchCommit(b, threads, events, false, true) })
		}
	}
}

func benchCommit(b *testing.B, threads, events int, fsync, producer bool) {
	s, err := sqlitestore.Open(filepath.Join(b.TempDir(), "tether.db"), sqlitestore.Options{Fsync: fsync})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchCommit(b, s, threads, events, producer)
}
