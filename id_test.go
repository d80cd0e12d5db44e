package tether

import (
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
