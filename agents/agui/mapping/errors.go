package mapping

import (
	"errors"
	"fmt"
)

// malformedError is what an upstream did wrong, as opposed to a fault
// here; its text is for people and quotes nothing the upstream sent but
// event types.
type malformedError struct{ msg string }

func (e *malformedError) Error() string { return e.msg }

func malformed(format string, args ...any) error {
	return &malformedError{fmt.Sprintf(format, args...)}
}

// IsMalformed reports whether err says the upstream sent an event that
// breaks AG-UI (as opposed to, say, an event too large to store).
func IsMalformed(err error) bool {
	var e *malformedError
	return errors.As(err, &e)
}
