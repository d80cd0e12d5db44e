package sqlitestore

import (
	"context"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/tetherhq/tether/store"
)

// translate maps the driver errors that have a store meaning to the store
// sentinels; the rest stay as they are, internal faults for the caller.
func translate(err error) error {
	var e *sqlite.Error
	if errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_CONSTRAINT {
		return store.ErrExists
	}
	return err
}

// unavailable marks a failed transaction store.ErrUnavailable when SQLite
// failed it for want of its disk: full (SQLITE_FULL), read-only, failing
// (SQLITE_IOERR), locked by another process past busyTimeout, or out of
// memory. Nothing of the transaction was written, and a retry succeeds once
// the disk is back: for the client that is 503 unavailable, not the 500 of
// a fault in Tether. Other errors stay as they are.
func unavailable(err error) error {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return err
	}
	switch e.Code() & 0xff {
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_BUSY,
		sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_PROTOCOL:
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// readErr wraps a reader failure. Once the store is closed, a read that
// raced with Close fails with ErrClosed rather than with whatever the closed
// handle said.
func (s *Store) readErr(what string, err error) error {
	switch {
	case s.closed.Load():
		return store.ErrClosed
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}
