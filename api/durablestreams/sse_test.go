package durablestreams

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"testing"
)

// parseEvent parses one SSE event the way browsers do.
func parseEvent(b []byte) (data string, events int) {
	s := strings.ReplaceAll(strings.ReplaceAll(string(b), "\r\n", "\n"), "\r", "\n")
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l == "" {
			if lines != nil {
				events++
				data = strings.Join(lines, "\n")
				lines = nil
			}
			continue
		}
		if v, ok := strings.CutPrefix(l, "data:"); ok {
			lines = append(lines, strings.TrimPrefix(v, " "))
		}
	}
	if lines != nil {
		events++ // an event not ended by a blank line
	}
	return data, events
}

// FuzzWriteData checks that any payload becomes exactly one event whose
// data is the payload with its line breaks as LF.
func FuzzWriteData(f *testing.F) {
	for _, seed := range []string{"", "a", "line1\nline2", "x\r\n\r\nevent: control\rdata: {}\r\r", " leading", "\n", "\r", "a\r\nb\rc\nd", "  two"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		var buf bytes.Buffer
		writeData(&buf, payload)
		data, n := parseEvent(buf.Bytes())
		want := strings.ReplaceAll(strings.ReplaceAll(string(payload), "\r\n", "\n"), "\r", "\n")
		if n != 1 || data != want {
			t.Fatalf("payload %q: %d events, data %q, want %q (frame %q)", payload, n, data, want, buf.Bytes())
		}
	})
}

func TestCursor(t *testing.T) {
	h := New(nil, Options{})
	c := h.cursor("")
	if c == "" || strings.Trim(c, "0123456789") != "" {
		t.Fatalf("cursor %q", c)
	}
	for _, client := range []string{c, "99999999999"} {
		next := h.cursor(client)
		if len(next) < len(client) || len(next) == len(client) && next <= client {
			t.Fatalf("cursor after %s: %s", client, next)
		}
	}
	if h.cursor("1") != c || h.cursor("junk") != c {
		t.Fatal("a cursor behind the clock is not the clock's")
	}
	// A client's cursor that cannot move forward (at the top of int64) is
	// not one this server gave: it starts again from the clock, never
	// wrapping to a negative number.
	top := strconv.FormatInt(math.MaxInt64, 10)
	if got := h.cursor(top); got != c {
		t.Fatalf("cursor after %s: %s, want the clock's %s", top, got, c)
	}
	// One below the top moves to the top when its jitter is one interval.
	if got := h.cursor(strconv.FormatInt(math.MaxInt64-1, 10)); got != c && got != top {
		t.Fatalf("cursor after the top but one: %s", got)
	}
}
