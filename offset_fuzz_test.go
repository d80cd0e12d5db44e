package tether_test

import (
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
)

// FuzzParseOffset feeds ParseOffset, ParseCursor and Compare arbitrary
// strings, as clients send them in ?after=, Last-Event-ID and ?offset=.
// Whatever the input: an offset that parses formats back to itself, a
// cursor is accepted exactly when it is empty, -1, now or an event offset
// of at most MaxOffsetLen bytes, a refusal is bad_request, and Compare
// orders event offsets as their strings and by (epoch, sequence).
func FuzzParseOffset(f *testing.F) {
	for _, s := range []string{
		"", "-1", "now", "0000000000_0000000000000000", "1700000000_0000000000000042",
		"9999999999_9999999999999999", "1700000000-0000000000000042", "1700000000_000000000000004",
		"+700000000_0000000000000042", "1/2", "１７00000000_0000000000000042", "NOW", " -1",
		strings.Repeat("9", 300),
	} {
		f.Add(s, "1700000000_0000000000000001")
	}
	f.Fuzz(func(t *testing.T, s, other string) {
		epoch, seq, err := tether.ParseOffset(tether.Offset(s))
		if err == nil {
			if got := tether.FormatOffset(epoch, seq); string(got) != s {
				t.Fatalf("ParseOffset(%q) = %d, %d, which formats as %q", s, epoch, seq, got)
			}
			if !tether.Offset(s).IsEvent() {
				t.Fatalf("%q parses but is not an event offset", s)
			}
		}
		c, cerr := tether.ParseCursor(s)
		special := s == "" || s == "-1" || s == "now"
		if want := special || err == nil && len(s) <= tether.MaxOffsetLen; (cerr == nil) != want {
			t.Fatalf("ParseCursor(%q): %v, want accepted=%v (ParseOffset: %v)", s, cerr, want, err)
		}
		if cerr != nil {
			if code := tether.CodeOf(cerr); code != tether.CodeBadRequest {
				t.Fatalf("ParseCursor(%q): code %s, want bad_request", s, code)
			}
			if msg := cerr.Error(); len(msg) > 200 {
				t.Fatalf("ParseCursor(%q): a %d-byte message echoes the input", s, len(msg))
			}
		} else if string(c) != s {
			t.Fatalf("ParseCursor(%q) = %q", s, c)
		}

		a, b := tether.Offset(s), tether.Offset(other)
		ab, ba := a.Compare(b), b.Compare(a)
		if ab != -ba || (ab == 0) != (s == other) {
			t.Fatalf("Compare(%q, %q) = %d, reversed %d", s, other, ab, ba)
		}
		if a.After(b) != (ab > 0) {
			t.Fatalf("After(%q, %q) disagrees with Compare", s, other)
		}
		e2, s2, err2 := tether.ParseOffset(b)
		if err == nil && err2 == nil {
			byNum := cmp(epoch, e2)
			if byNum == 0 {
				byNum = cmp(seq, s2)
			}
			if ab != byNum || ab != strings.Compare(s, other) {
				t.Fatalf("Compare(%q, %q) = %d; by number %d", s, other, ab, byNum)
			}
		}
		if err == nil && (tether.OffsetStart.Compare(a) >= 0 || tether.OffsetNow.Compare(a) <= 0) {
			t.Fatalf("%q does not sort between -1 and now", s)
		}
	})
}

func cmp(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
