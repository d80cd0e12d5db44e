package store

import (
	"encoding/base64"
	"encoding/binary"
)

// Limits of ThreadQuery.Limit.
const (
	DefaultThreadsLimit = 50
	MaxThreadsLimit     = 1000
)

// PageLimit is the page size the query asks for, within the limits.
func (q ThreadQuery) PageLimit() int {
	if q.Limit <= 0 {
		return DefaultThreadsLimit
	}
	return min(q.Limit, MaxThreadsLimit)
}

// A listing's cursor (ThreadPage.Next, ThreadQuery.Cursor) is the last
// thread of the page it follows, as the listing's order knows it: its
// update time in Unix milliseconds and its ID, opaque to clients. Every
// store writes it alike, so a cursor stays good across a change of store.

// EncodeThreadCursor makes the cursor that continues a listing after the
// thread updated at updatedMillis with this ID.
func EncodeThreadCursor(updatedMillis int64, id string) string {
	b := make([]byte, 8, 8+len(id))
	binary.BigEndian.PutUint64(b, uint64(updatedMillis))
	return base64.RawURLEncoding.EncodeToString(append(b, id...))
}

// DecodeThreadCursor reads a cursor of EncodeThreadCursor; ok is false for
// anything else.
func DecodeThreadCursor(c string) (updatedMillis int64, id string, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) <= 8 {
		return 0, "", false
	}
	return int64(binary.BigEndian.Uint64(b)), string(b[8:]), true
}
