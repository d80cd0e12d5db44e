// Package clip cuts what a client sent short before it goes into an
// error message or a log line: an answer never echoes more than a few
// bytes of its request, whatever was sent as an ID, a type or a value.
package clip

import "strings"

// IDBytes is how much of an ID an error message repeats: more than any
// ID Tether makes, far less than one a client could send.
const IDBytes = 140

// String returns s, or its first n bytes and "…" if it is longer. The
// cut never splits a character: a partial one at the cut is dropped, as
// are bytes that are not UTF-8 there.
func String(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// ID returns id cut to IDBytes (String).
func ID(id string) string { return String(id, IDBytes) }
