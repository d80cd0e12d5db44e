package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 4, ""},
		{"abcd", 4, "abcd"},
		{"abcde", 4, "abcd…"},
		{"ab€", 4, "ab…"},      // € is 3 bytes: its first 2 are dropped
		{"a\xffbcd", 3, "ab…"}, // a byte that is not UTF-8 is dropped
	} {
		if got := String(c.s, c.n); got != c.want {
			t.Errorf("String(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
	long := strings.Repeat("é", 1000)
	if got := ID(long); !utf8.ValidString(got) || len(got) > IDBytes+len("…") {
		t.Errorf("ID of 2,000 bytes: %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
	}
}
