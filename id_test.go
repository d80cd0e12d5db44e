package tether

import (
	"regexp"
	"strings"
	"testing"
)

func TestValidID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"t1", true},
		{"run_01jd8x", true},
		{"a.b", true},
		{"...", true},
		{".hidden", true},
		{"~-_.", true},
		{strings.Repeat("a", 128), true},
		// URL paths resolve these as relative segments: a thread so named
		// could be created but never reached.
		{".", false},
		{"..", false},
		{"", false},
		{strings.Repeat("a", 129), false},
		{"a/b", false},
		{"ds:x", false},
		{"a b", false},
		{"é", false},
	} {
		if got := ValidID(tc.id); got != tc.ok {
			t.Errorf("ValidID(%q) = %v, want %v", tc.id, got, tc.ok)
		}
	}
}

// idPattern is what ValidID accepts, as a regular expression: the rule as
// it was first written, kept as the reference of the loop that replaced it.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9._~-]{1,128}$`)

func FuzzValidID(f *testing.F) {
	for _, s := range []string{"t1", "", ".", "..", "...", "a/b", "é", "run_01jd8x", strings.Repeat("a", 128), strings.Repeat("a", 129), "a\x00", "~-_."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := s != "." && s != ".." && idPattern.MatchString(s)
		if got := ValidID(s); got != want {
			t.Fatalf("ValidID(%q) = %v, the rule says %v", s, got, want)
		}
	})
}

func BenchmarkValidID(b *testing.B) {
	id := NewID("run_")
	b.Run("loop", func(b *testing.B) {
		for b.Loop() {
			if !ValidID(id) {
				b.Fatal(id)
			}
		}
	})
	b.Run("regexp", func(b *testing.B) {
		for b.Loop() {
			if !idPattern.MatchString(id) {
				b.Fatal(id)
			}
		}
	})
}
