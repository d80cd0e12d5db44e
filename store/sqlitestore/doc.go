// Package sqlitestore is the embedded default store.Store: every thread's
// log and all metadata in one SQLite file (WAL mode), through the pure-Go
// driver modernc.org/sqlite.
//
// Use Open, then the store.Store methods:
//
//	st, err := sqlitestore.Open("data/tether.db", sqlitestore.Options{Fsync: true})
//	if err != nil {
//		return err
//	}
//	defer st.Close()
//
// # Writes
//
// One goroutine writes, on one connection. Commit queues its batch and
// waits; the writer takes every batch queued meanwhile (up to
// Options.MaxBatchEvents events) into one transaction: each batch is
// checked against its thread (Create, Version), written, and the whole
// group is committed at once, so one fsync serves them all. When recent
// groups held more than one batch, the writer first yields the processor
// for as long as batches keep arriving, so that callers about to queue
// theirs join the group; a lone caller is not held back. The events of the group go in with one INSERT at its end
// (before a deletion or a savepoint, which must see them). A batch that
// fails (a taken idempotency key) is rolled back to its savepoint without
// affecting the others; a fault fails the whole group, and none of it is
// written. A fault of the disk (full, read-only, failing) is
// store.ErrUnavailable: a retry succeeds once the disk is back. Once committed, the batches are reported in order to the
// notify function and only then do their Commit calls return.
//
// Offsets are tether.FormatOffset(epoch, id): id is the event's row id,
// never reused (AUTOINCREMENT), and the epoch is bumped at every Open, to
// the current Unix time (an Open within the second of the one before waits
// for the next: see nextEpoch), and stored with each event. A cursor is
// valid only if its id, epoch and thread all match a stored event.
//
// Reads use a pool of read-only connections and never wait for the writer.
// The WAL is copied into the file by a background checkpointer, so commits
// never pay for it.
//
// # Caveats
//
// One process at a time: Open takes an exclusive lock (flock on
// "<path>-lock"), because the writer keeps each thread's version and the
// next event id in memory. A second Open of the same file, in this process
// or another, fails. On platforms without flock that mistake goes
// undetected and corrupts the store's bookkeeping.
//
// Without Options.Fsync a commit survives a crash of the process but not a
// power loss: the last commits before it may be gone. Their offsets are not
// reused, since the next Open starts a new epoch, so clients holding them
// get ErrOffsetNotFound (and a fresh snapshot) instead of other events.
//
// DeleteThread deletes a thread's events in the writer's transaction: a
// thread of millions of events holds up every commit while it goes.
//
// The database file is only complete after Close (which checkpoints the
// WAL); to copy a live store, copy the file with its -wal, or use SQLite's
// backup API from another connection.
package sqlitestore
