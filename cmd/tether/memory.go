package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// After a burst (a thousand runs, as many streams) the Go runtime keeps
// the heap it grew to: what the burst freed stays mapped, for the next
// one, and is handed back to the OS only slowly, once a collection has run
// (an idle server collects every two minutes). A server that was busy for
// a minute then stayed at ten times its idle size. trimMemory hands it back
// once the server is quiet: a collection, then every free page returned
// (debug.FreeOSMemory). It costs one full collection per burst, never
// during one: it waits for a quiet interval.

// trimEvery is how often the runtime's figures are read.
const trimEvery = 10 * time.Second

// memStats are the runtime figures trimMemory decides on.
type memStats struct {
	held   uint64 // heap memory mapped and not returned to the OS: objects (live or garbage not yet collected), free and unused
	live   uint64 // heap live after the last collection
	allocs uint64 // bytes allocated since the process started
}

var trimSamples = []metrics.Sample{
	{Name: "/memory/classes/heap/objects:bytes"},
	{Name: "/memory/classes/heap/unused:bytes"},
	{Name: "/memory/classes/heap/free:bytes"},
	{Name: "/gc/heap/live:bytes"},
	{Name: "/gc/heap/allocs:bytes"},
}

func readMemStats() memStats {
	s := make([]metrics.Sample, len(trimSamples))
	copy(s, trimSamples)
	metrics.Read(s)
	u := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	return memStats{held: u(0) + u(1) + u(2), live: u(3), allocs: u(4)}
}

// shouldTrim decides from two readings trimEvery apart: trim when the heap
// holds much more than its live objects (over 32 MiB more, and over half
// the live heap more: a server that keeps its size is left alone) and the
// server allocated little meanwhile (under 1 MiB/s: quiet, not between two
// collections of a busy time).
func shouldTrim(prev, now memStats, every time.Duration) bool {
	const minExcess = 32 << 20
	quiet := uint64(every.Seconds() * (1 << 20))
	if now.held < now.live {
		return false
	}
	excess := now.held - now.live
	return excess > minExcess && excess > now.live/2 && now.allocs-prev.allocs < quiet
}

// trimMemory returns free heap memory to the OS whenever the server turns
// quiet after a burst, until ctx ends.
func trimMemory(ctx context.Context, log *slog.Logger) {
	t := time.NewTicker(trimEvery)
	defer t.Stop()
	prev := readMemStats()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := readMemStats()
		if shouldTrim(prev, now, trimEvery) {
			t0 := time.Now()
			debug.FreeOSMemory()
			after := readMemStats()
			log.Debug("returned free memory to the OS", "held_before", now.held, "held_after", after.held, "live", after.live, "took", time.Since(t0).Round(time.Millisecond))
			now = after
		}
		prev = now
	}
}

// parseBytes reads a size as GOMEMLIMIT writes it: a whole number of bytes,
// optionally followed by B, KiB, MiB, GiB or TiB.
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("not a size: %q", s)
	}
	return n * mult, nil
}
