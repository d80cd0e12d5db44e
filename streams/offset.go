package streams

import (
	"strings"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
)

// Offsets on the wire. A position in a stream is named by the offset of the
// event that ends there: Tether offsets ("EEEEEEEEEE_SSSSSSSSSSSSSSSS"),
// the same format as thread offsets, so they sort as strings in log order
// across forks (a fork's own events always come after the events it
// inherits). The start of a stream is the zero offset.
const (
	// OffsetStart asks for a stream from its beginning ("-1").
	OffsetStart = "-1"
	// OffsetNow asks for the tail.
	OffsetNow = "now"
)

// ZeroOffset is the position before the first event, as it is sent to
// clients (never "-1", which the protocol reserves).
var ZeroOffset = string(tether.FormatOffset(0, 0))

// position is where a read starts: the start of a stream (tether.OffsetStart)
// or an event offset.
type position = tether.Offset

// parsePosition checks an offset sent by a client: "-1", an all-zero
// offset (any width, as other servers write it) or a Tether event offset.
// Other well-formed offsets ("digits_digits") name no position of any
// stream here: ok is false and err nil. Anything else is malformed.
func parsePosition(s string) (p position, ok bool, err error) {
	switch {
	case s == OffsetStart:
		return tether.OffsetStart, true, nil
	case !wellFormed(s):
		return "", false, errorf(CodeBadRequest, "offset %q is malformed", clip.String(s, 64))
	case strings.Trim(s, "0_") == "":
		return tether.OffsetStart, true, nil
	}
	if _, _, err := tether.ParseOffset(tether.Offset(s)); err != nil {
		return "", false, nil
	}
	return tether.Offset(s), true, nil
}

// wellFormed reports whether s has the shape of an offset: digits, one
// underscore, digits, at most 255 bytes.
func wellFormed(s string) bool {
	if len(s) == 0 || len(s) > tether.MaxOffsetLen {
		return false
	}
	us := strings.IndexByte(s, '_')
	if us <= 0 || us == len(s)-1 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if i != us && (s[i] < '0' || s[i] > '9') {
			return false
		}
	}
	return true
}

// wire returns the offset clients see for a position.
func wire(p position) string {
	if !p.IsEvent() {
		return ZeroOffset
	}
	return string(p)
}

// before reports whether position a sorts strictly before b.
func before(a, b position) bool { return a.Compare(b) < 0 }
