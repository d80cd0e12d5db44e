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
// (an idle server collects every two minutes); and what the burst left
// live (the recent events of the threads it wrote, kept for resumes) is
// spread over pages that are otherwise garbage, which pins them. A server
// that was busy for a minute stayed at ten times its idle size.
//
// trimMemory gives it back once the server is quiet after growing: it
// drops the caches that only spare store reads (dropCaches: the fan-out
// rings and the states of the threads with no run in progress), then
// collects and returns every free page to the OS (debug.FreeOSMemory).
// That is one full collection per burst, never during one.

// trimEvery is how often the runtime's figures are read.
const trimEvery = 10 * time.Second

// memStats are the runtime figures trimMemory decides on.
type memStats struct {
	held   uint64 // heap memory mapped and not returned to the OS: objects (live or garbage not yet collected), free and unused
	allocs uint64 // bytes allocated since the process started
}

var trimSamples = []metrics.Sample{
	{Name: "/memory/classes/heap/objects:bytes"},
	{Name: "/memory/classes/heap/unused:bytes"},
	{Name: "/memory/classes/heap/free:bytes"},
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
	return memStats{held: u(0) + u(1) + u(2), allocs: u(3)}
}

// trimGrowth is how much the heap must have grown since the last trim (or
// the start) for a quiet server to be trimmed: a burst, not the ebb and
// flow of a steady load, and never twice for the same growth.
const trimGrowth = 64 << 20

// shouldTrim decides from two readings every apart, and the heap held
// after the last trim: trim when the heap grew by trimGrowth since and the
// server allocated little meanwhile (under 1 MiB/s: quiet, not between two
// collections of a busy time).
func shouldTrim(base uint64, prev, now memStats, every time.Duration) bool {
	return now.held >= base+trimGrowth && isQuiet(prev, now, every)
}

// isQuiet reports whether the server allocated under 1 MiB/s between two
// readings every apart.
func isQuiet(prev, now memStats, every time.Duration) bool {
	return now.allocs-prev.allocs < uint64(every.Seconds()*(1<<20))
}

// trimMemory returns memory to the OS whenever the server turns quiet
// after growing, until ctx ends. dropCaches, if set, is called first.
//
// heartbeat is the streams' (--heartbeat): a stream whose client left
// during the burst ends only when a write to it fails, the second ping
// after the client left, and what it held is freed then; so the trim is
// done once more, two heartbeats later.
func trimMemory(ctx context.Context, log *slog.Logger, heartbeat time.Duration, dropCaches func() int) {
	t := time.NewTicker(trimEvery)
	defer t.Stop()
	prev := readMemStats()
	base := prev.held
	var again time.Time // when to trim once more, if set
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := readMemStats()
		if shouldTrim(base, prev, now, trimEvery) || isQuiet(prev, now, trimEvery) && !again.IsZero() && time.Now().After(again) {
			t0 := time.Now()
			dropped := 0
			if dropCaches != nil {
				dropped = dropCaches()
			}
			debug.FreeOSMemory()
			after := readMemStats()
			log.Debug("returned free memory to the OS", "held_before", now.held, "held_after", after.held, "caches_dropped", dropped, "took", time.Since(t0).Round(time.Millisecond))
			if again.IsZero() {
				again = time.Now().Add(2*heartbeat + trimEvery)
			} else {
				again = time.Time{}
			}
			now, base = after, after.held
		}
		base = min(base, now.held)
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
