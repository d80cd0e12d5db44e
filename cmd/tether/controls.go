package main

import (
	"strconv"
	"strings"
	"unicode"
)

// What agents and other users wrote (a tool's name, a question, an error
// message, a thread's title) is shown on a terminal with its control
// characters written as escapes (\x1b, \a): raw, an escape sequence in it
// would clear the screen, retitle the window or set the clipboard (OSC 52).
// The answer's text on stdout is left as it is, like any file a command
// prints.

// safeLine is s for one line of output: every control character escaped,
// line ends and tabs too.
func safeLine(s string) string { return escapeControls(s, false) }

// safeText is s for lines of notes: control characters escaped, but line
// ends and tabs kept.
func safeText(s string) string { return escapeControls(s, true) }

func escapeControls(s string, keepSpace bool) string {
	bad := func(r rune) bool {
		return unicode.IsControl(r) && !(keepSpace && (r == '\n' || r == '\t'))
	}
	if !strings.ContainsFunc(s, bad) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if bad(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
