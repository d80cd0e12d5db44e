package tether

import (
	"bytes"
	"time"
)

// TimeLayout is the wire format of every timestamp: RFC 3339 with
// milliseconds, in UTC.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// Time is a timestamp that encodes as RFC 3339 with milliseconds in UTC, and
// as null when zero.
type Time struct{ time.Time }

// Now returns the current time truncated to milliseconds, so that a value
// survives a round trip through JSON unchanged.
func Now() Time { return At(time.Now()) }

// At returns t in UTC, truncated to milliseconds.
func At(t time.Time) Time {
	if t.IsZero() {
		return Time{}
	}
	return Time{t.UTC().Truncate(time.Millisecond)}
}

// MarshalJSON implements json.Marshaler.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	b := make([]byte, 0, len(TimeLayout)+2)
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, TimeLayout)
	return append(b, '"'), nil
}

// UnmarshalJSON implements json.Unmarshaler. It accepts null and any RFC 3339
// time.
func (t *Time) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*t = Time{}
		return nil
	}
	var tt time.Time
	if err := tt.UnmarshalJSON(b); err != nil {
		return err
	}
	*t = At(tt)
	return nil
}
