package sqlitestore

import (
	"context"
	"fmt"
	"time"
)

// SetCheckpointing changes the checkpointer's tick and WAL restart size for
// the stores opened after it, and returns a function that restores them.
func SetCheckpointing(every time.Duration, restartPages int) (restore func()) {
	e, p := checkpointEvery, walRestartPages
	checkpointEvery, walRestartPages = every, restartPages
	return func() { checkpointEvery, walRestartPages = e, p }
}

// SetSleep changes how the stores opened after it wait for the clock to
// pass their stored epoch, and returns a function that restores it.
func SetSleep(sleep func(time.Duration)) (restore func()) {
	old := epochSleep
	epochSleep = sleep
	return func() { epochSleep = old }
}

// Transactions returns how many transactions the writer has run.
func Transactions(s *Store) int64 { return s.txs.Load() }

// Queued returns how many requests wait for the writer.
func Queued(s *Store) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// SetCommitFault makes every transaction call fault at its end, before the
// group's events are inserted and the COMMIT, and fail with the error it
// returns. Set it while no transaction runs.
func SetCommitFault(s *Store, fault func() error) { s.commitFault = fault }

// SetMaxPages caps the database at n pages (PRAGMA max_page_count on the
// writer's connection; it cannot go below the file's current size) and
// returns the cap in force: past it SQLite fails writes with SQLITE_FULL,
// as it does on a full disk.
func SetMaxPages(s *Store, n int64) (int64, error) {
	var got int64
	err := s.do(&request{ctx: context.Background(), weight: 1,
		check: func(*Store, *request) error { return nil },
		write: func(s *Store, _ *request) error {
			return s.wconn.QueryRowContext(context.Background(), fmt.Sprintf("PRAGMA max_page_count = %d", n)).Scan(&got)
		}})
	return got, err
}
