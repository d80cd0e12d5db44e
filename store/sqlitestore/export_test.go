package sqlitestore

import "time"

// SetCheckpointing changes the checkpointer's tick and WAL restart size for
// the stores opened after it, and returns a function that restores them.
func SetCheckpointing(every time.Duration, restartPages int) (restore func()) {
	e, p := checkpointEvery, walRestartPages
	checkpointEvery, walRestartPages = every, restartPages
	return func() { checkpointEvery, walRestartPages = e, p }
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
