package store

import "errors"

// Errors returned by every Store implementation. Backends translate their
// driver's errors into these; anything else is an internal fault.
var (
	// ErrNotFound means the thread, run or checkpoint does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrExists means a thread or an idempotency key already exists.
	ErrExists = errors.New("store: already exists")
	// ErrConflict means a batch's Version did not match the thread.
	ErrConflict = errors.New("store: version conflict")
	// ErrOffsetNotFound means a read's offset names no event of the thread.
	ErrOffsetNotFound = errors.New("store: offset not found")
	// ErrClosed means the store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrUnavailable means the backend could not be reached or did not
	// answer in time (a NATS server down, a stream without quorum), or
	// could not write (SQLite on a full, read-only or failing disk). The
	// operation may be retried; for a Commit, its outcome is unknown.
	ErrUnavailable = errors.New("store: unavailable")
	// ErrTooLarge means a batch is larger than the store takes in one
	// commit (JetStream: one message). Nothing was written.
	ErrTooLarge = errors.New("store: batch too large")
)
