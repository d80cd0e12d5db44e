package engine

import (
	"context"
	"errors"
	"fmt"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// errClosed is returned once the engine is closing.
var errClosed = tether.Errorf(tether.CodeUnavailable, "the server is shutting down")

// ErrClosed is the error (unavailable) of a call made once the engine is
// closing, as opposed to one the store could not serve for now: match it
// with errors.Is.
var ErrClosed error = errClosed

// errNoFeed ends the subscriptions of a node that cannot follow the
// store's log (feed.go).
var errNoFeed = tether.Errorf(tether.CodeUnavailable, "this server cannot follow the log for now; resume from your offset")

// storeErr turns a store error into one a client may see; what names the
// object ("thread t1").
func (e *Engine) storeErr(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return tether.Errorf(tether.CodeNotFound, "%s not found", what)
	case errors.Is(err, store.ErrExists):
		return tether.Errorf(tether.CodeConflict, "%s already exists", what)
	case errors.Is(err, store.ErrConflict):
		return tether.Wrap(err, tether.CodeConflict, what+" was changed concurrently; retry")
	case errors.Is(err, store.ErrOffsetNotFound):
		return tether.Errorf(tether.CodeBadRequest, "offset is not in the log of %s", what)
	case errors.Is(err, store.ErrClosed):
		return errClosed
	case errors.Is(err, store.ErrUnavailable):
		return tether.Wrap(err, tether.CodeUnavailable, "the store is unavailable; retry")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	var te *tether.Error
	if errors.As(err, &te) {
		return err
	}
	return tether.Wrap(err, tether.CodeInternal, "internal error")
}
