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

// Memory is returned once the server is quiet after a burst, not while it
// is busy, nor when what it holds free is small or in proportion to what
// it uses.
func TestShouldTrim(t *testing.T) {
	const mib = 1 << 20
	every := 10 * time.Second
	prev := memStats{allocs: 1000 * mib}
	for _, c := range []struct {
		name string
		now  memStats
		want bool
	}{
		{"quiet after a burst", memStats{held: 580 * mib, live: 80 * mib, allocs: 1001 * mib}, true},
		{"busy", memStats{held: 580 * mib, live: 80 * mib, allocs: 1200 * mib}, false},
		{"little held beyond live", memStats{held: 30 * mib, live: 10 * mib, allocs: 1000 * mib}, false},
		{"held in proportion to live", memStats{held: 500 * mib, live: 400 * mib, allocs: 1000 * mib}, false},
		{"live above held (a collection since)", memStats{held: 50 * mib, live: 60 * mib, allocs: 1000 * mib}, false},
	} {
		if got := shouldTrim(prev, c.now, every); got != c.want {
			t.Errorf("%s: shouldTrim = %v, want %v", c.name, got, c.want)
		}
	}
}
