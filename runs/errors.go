package runs

import (
	"errors"
	"strconv"
	"strings"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
)

// Every rejection of an event is a *tether.Error with code bad_request (the
// event is malformed or names something that does not exist), conflict
// (the event is well formed but impossible in the current state) or
// too_large (it would take the thread's state past its bound), so that
// the API maps them without knowing this package. The sentinels below are
// DecodeState's, which no client ever sees.

var (
	// ErrStateVersion is returned by DecodeState for an encoding of a
	// version it does not know.
	ErrStateVersion = errors.New("runs: state encoding of an unknown version")
	// ErrStateCorrupt is returned by DecodeState for an encoding it
	// cannot read or that makes an inconsistent State.
	ErrStateCorrupt = errors.New("runs: corrupt state encoding")
)

func badRequest(format string, args ...any) error {
	return tether.Errorf(tether.CodeBadRequest, format, args...)
}

func conflict(format string, args ...any) error {
	return tether.Errorf(tether.CodeConflict, format, args...)
}

// q prints an id for an error message. Ids that passed tether.ValidID are
// printed as they are; anything else came from the client unchecked, so it
// is quoted and cut short to keep messages small and printable.
func q(id string) string {
	if tether.ValidID(id) {
		return id
	}
	const max = 40
	if len(id) > max {
		return strconv.Quote(id[:max]) + "…"
	}
	return strconv.Quote(id)
}

func tooLarge(format string, args ...any) error {
	return tether.Errorf(tether.CodeTooLarge, format, args...)
}

func notAllowed(field, typ string) error {
	return badRequest("field %q is not allowed in %s", field, typ)
}

func required(field, typ string) error {
	return badRequest("field %q is required in %s", field, typ)
}

func invalidID(field, id string) error {
	return badRequest("%s %s is not a valid id (%s)", field, q(id), tether.IDRule)
}

func errRunFinished(id string) error {
	return conflict("run %s is finished", id)
}

func oneOf(field, typ, got string, want ...string) error {
	return badRequest("field %q of %s must be one of %s, got %s", field, typ, strings.Join(want, "|"), strconv.Quote(clip.String(got, 40)))
}
