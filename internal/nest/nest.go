// Package nest holds the rule every value Tether keeps as it came
// (metadata, state, data, an answer) is held to, since it reaches every
// reader of the thread: UTF-8, and nested no deeper than every JSON decoder
// reads (Go's takes 10,000 levels; Python's json refuses about 1,000, less
// its caller's stack).
package nest

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Max is how deep a value kept as it came may nest: request bodies
// (counting the body's own level), events from any source, Durable
// Streams JSON appends and a thread's state. Agent states and tool
// arguments nest a few tens of levels at most.
const Max = 256

// Depth returns how deep the arrays and objects of b nest: 0 for a
// scalar, 1 for [] or {}. b need not be valid JSON; the brackets in
// strings do not count. It stops counting past stop (a positive stop
// returns as soon as the depth exceeds it; 0 means no stop), so a check
// against a limit costs no more than the text up to the first level over.
func Depth(b []byte, stop int) int {
	depth, max := 0, 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '[', '{':
			if depth++; depth > max {
				if max = depth; stop > 0 && max > stop {
					return max
				}
			}
		case ']', '}':
			depth--
		}
	}
	return max
}

// Within reports whether b nests at most max levels deep.
func Within(b []byte, max int) bool { return Depth(b, max) <= max }

// ErrNotUTF8 and ErrTooDeep are why Check refuses a value; their text
// follows what the value is ("request body …", "field \"data\" of custom …").
var (
	ErrNotUTF8 = errors.New("is not valid UTF-8")
	ErrTooDeep = fmt.Errorf("is nested more than %d levels deep", Max)
)

// Check applies the rule for a value kept as it came: UTF-8 (JSON is,
// RFC 8259; Go's decoder does not check it) and nested at most Max deep.
func Check(b []byte) error {
	if !utf8.Valid(b) {
		return ErrNotUTF8
	}
	if !Within(b, Max) {
		return ErrTooDeep
	}
	return nil
}
