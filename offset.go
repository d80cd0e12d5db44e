package tether

import (
	"fmt"
	"strconv"

	"github.com/tetherhq/tether/internal/clip"
)

// An Offset names a position in a thread's log: the position right after the
// event that carries it. Offsets are opaque to clients, strictly increasing
// within a log, sortable as strings, URL-safe and never reused, also after a
// crash that lost unsynced data or a restore from a backup.
//
// The format is "EEEEEEEEEE_SSSSSSSSSSSSSSSS": a zero-padded epoch and a
// zero-padded sequence number. The sequence is unique within one store; the
// epoch is bumped each time a store is opened, so an event written after a
// restart never gets the offset of one that was lost before it.
type Offset string

const (
	// OffsetStart means "before the first event" (-1 on the wire).
	OffsetStart Offset = "-1"
	// OffsetNow means "the tail of the log" (now on the wire).
	OffsetNow Offset = "now"
)

const (
	epochDigits = 10
	seqDigits   = 16
	offsetLen   = epochDigits + 1 + seqDigits
)

// MaxOffsetLen is the longest offset string a server accepts as a cursor.
const MaxOffsetLen = 255

// FormatOffset returns the offset of the event with sequence seq written in
// epoch epoch.
func FormatOffset(epoch, seq uint64) Offset {
	return Offset(fmt.Sprintf("%0*d_%0*d", epochDigits, epoch, seqDigits, seq))
}

// ParseOffset splits an event offset into its epoch and sequence. It returns
// an error for anything that is not an event offset, including the special
// values OffsetStart and OffsetNow.
func ParseOffset(o Offset) (epoch, seq uint64, err error) {
	s := string(o)
	if len(s) != offsetLen || s[epochDigits] != '_' {
		return 0, 0, fmt.Errorf("offset %q is malformed", clip.String(s, 40))
	}
	for i := 0; i < len(s); i++ {
		if i != epochDigits && (s[i] < '0' || s[i] > '9') {
			return 0, 0, fmt.Errorf("offset %q is malformed", clip.String(s, 40))
		}
	}
	epoch, err1 := strconv.ParseUint(s[:epochDigits], 10, 64)
	seq, err2 := strconv.ParseUint(s[epochDigits+1:], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("offset %q is malformed", clip.String(s, 40))
	}
	return epoch, seq, nil
}

// ParseCursor checks a cursor sent by a client: OffsetStart, OffsetNow or an
// event offset. The empty string is returned as is (no cursor).
func ParseCursor(s string) (Offset, error) {
	switch Offset(s) {
	case "", OffsetStart, OffsetNow:
		return Offset(s), nil
	}
	if len(s) > MaxOffsetLen {
		return "", Errorf(CodeBadRequest, "offset is longer than %d bytes", MaxOffsetLen)
	}
	if _, _, err := ParseOffset(Offset(s)); err != nil {
		return "", Errorf(CodeBadRequest, "%s", err.Error())
	}
	return Offset(s), nil
}

// IsEvent reports whether o names an event (it is neither empty nor one of
// the special values).
func (o Offset) IsEvent() bool {
	return o != "" && o != OffsetStart && o != OffsetNow
}

// Compare returns -1, 0 or +1 as o sorts before, equal to or after p, with
// OffsetStart (and the empty offset) before every event offset.
func (o Offset) Compare(p Offset) int {
	a, b := o.rank(), p.rank()
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	case o < p:
		return -1
	case o > p:
		return 1
	}
	return 0
}

// After reports whether o sorts strictly after p.
func (o Offset) After(p Offset) bool { return o.Compare(p) > 0 }

func (o Offset) rank() int {
	switch o {
	case "", OffsetStart:
		return 0
	case OffsetNow:
		return 2
	}
	return 1
}
