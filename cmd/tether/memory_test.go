package main

import (
	"testing"
	"time"
)

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"512MiB": 512 << 20, "2GiB": 2 << 30, "1000": 1000, "64 KiB": 64 << 10, "7B": 7, "1TiB": 1 << 40} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1MiB", "1.5GiB", "12 apples", "99999999999TiB"} {
		if got, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) = %d, want an error", in, got)
		}
	}
}

// Memory is returned once the server is quiet after its heap grew by a
// burst: not while it is busy, not for a small growth, and not twice for
// the same growth.
func TestShouldTrim(t *testing.T) {
	const mib = 1 << 20
	every := 10 * time.Second
	base := uint64(20 * mib)
	prev := memStats{held: 600 * mib, allocs: 1000 * mib}
	for _, c := range []struct {
		name string
		base uint64
		now  memStats
		want bool
	}{
		{"quiet after a burst", base, memStats{held: 600 * mib, allocs: 1001 * mib}, true},
		{"busy", base, memStats{held: 600 * mib, allocs: 1200 * mib}, false},
		{"a small growth", base, memStats{held: 60 * mib, allocs: 1000 * mib}, false},
		{"trimmed already (what stays is live or pinned)", 590 * mib, memStats{held: 600 * mib, allocs: 1000 * mib}, false},
	} {
		if got := shouldTrim(c.base, prev, c.now, every); got != c.want {
			t.Errorf("%s: shouldTrim = %v, want %v", c.name, got, c.want)
		}
	}
}
