package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// sweepWatch counts the sweeps of the engine on it, so that a test that
// advances the clock can wait for a sweep that read the new time, rather
// than sleep for what is a few sweep intervals on an idle machine and may
// be none on a loaded one. Every sweep starts by reading the active runs
// (store.ActiveRuns), and the sweeper runs one sweep at a time.
type sweepWatch struct {
	store.Store
	reads atomic.Int64
}

func (w *sweepWatch) ActiveRuns(ctx context.Context) ([]*store.RunRecord, error) {
	w.reads.Add(1)
	return w.Store.ActiveRuns(ctx)
}

// swept waits for a whole sweep that started after the call: the first
// read after it starts one, the second starts only once that one is done.
func (w *sweepWatch) swept(t *testing.T) {
	t.Helper()
	from := w.reads.Load()
	testutil.Eventually(t, 10*time.Second, "a sweep", func() bool { return w.reads.Load() >= from+2 })
}
