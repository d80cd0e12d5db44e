package sqlitestore

import "time"

// SetCheckpointing changes the checkpointer's tick and WAL restart size for
// the stores opened after it, and returns a function that restores them.
func SetCheckpointing(every time.Duration, restartPages int) (restore func()) {
	e, p := checkpointEvery, walRestartPages
	checkpointEvery, walRestartPages = every, restartPages
	return func() { checkpointEvery, walRestartPages = e, p }
}
