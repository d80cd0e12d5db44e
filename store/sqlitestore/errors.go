package sqlitestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/tetherhq/tether/store"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
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
