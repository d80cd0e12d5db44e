package main

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// histBits sets the precision of a hist: 2^histBits buckets per power of
// two, so a quantile is within 1/2^histBits (1.6%) of the true value.
const histBits = 6

// hist is a log-linear histogram of durations in nanoseconds. It is not
// safe for concurrent use: keep one per goroutine and merge them.
type hist struct {
	counts [(64 - histBits + 1) << histBits]uint64
	n      uint64
	max    int64
}

func histIndex(v int64) int {
	if v < 1<<histBits {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - histBits - 1 // v>>e is in [2^histBits, 2^(histBits+1))
	return (e+1)<<histBits + int(v>>e) - 1<<histBits
}

// histValue is the middle of bucket i.
func histValue(i int) int64 {
	if i < 1<<histBits {
		return int64(i)
	}
	e := i>>histBits - 1
	m := int64(i&(1<<histBits-1) + 1<<histBits)
	return m<<e + (int64(1)<<e)/2
}

func (h *hist) record(d time.Duration) {
	v := int64(d)
	h.counts[histIndex(v)]++
	h.n++
	h.max = max(h.max, v)
}

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile returns the q-quantile (0 < q ≤ 1).
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(histValue(i), h.max))
		}
	}
	return time.Duration(h.max)
}

// latency is the JSON form of a distribution, in milliseconds.
type latency struct {
	Count uint64  `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
}

func (h *hist) summary() latency {
	ms := func(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }
	return latency{
		Count: h.n, P50: ms(h.quantile(.5)), P90: ms(h.quantile(.9)), P99: ms(h.quantile(.99)),
		P999: ms(h.quantile(.999)), Max: ms(time.Duration(h.max)),
	}
}

func (l latency) String() string {
	if l.Count == 0 {
		return "-"
	}
	return fmt.Sprintf("p50 %s  p90 %s  p99 %s  p99.9 %s  max %s", fmtMs(l.P50), fmtMs(l.P90), fmtMs(l.P99), fmtMs(l.P999), fmtMs(l.Max))
}

func fmtMs(ms float64) string {
	switch {
	case ms < 1:
		return strconv.FormatFloat(ms*1000, 'f', 0, 64) + "µs"
	case ms < 10:
		return strconv.FormatFloat(ms, 'f', 2, 64) + "ms"
	case ms < 100:
		return strconv.FormatFloat(ms, 'f', 1, 64) + "ms"
	}
	return strconv.FormatFloat(ms, 'f', 0, 64) + "ms"
}

// commas formats n with thousands separators.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3+1)
	if neg {
		out = append(out, '-')
	}
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// perSec is n per second over d, rounded.
func perSec(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return math.Round(float64(n) / d.Seconds())
}

func fmtRate(r float64) string { return commas(int64(r)) + "/s" }

func fmtBytes(n float64) string {
	switch {
	case math.Abs(n) >= 10<<20:
		return strconv.FormatFloat(n/(1<<20), 'f', 1, 64) + " MiB"
	case math.Abs(n) >= 10<<10:
		return strconv.FormatFloat(n/(1<<10), 'f', 1, 64) + " KiB"
	}
	return commas(int64(n)) + " B"
}

func seconds(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }

// cpuMeter measures the CPU time the server (from /metrics) and the bench
// (from getrusage) spend over a span: on a shared machine, throughput per
// CPU second is steadier than throughput.
type cpuMeter struct {
	at             time.Time
	server, client float64 // seconds
	ok             bool
	machine        machineCPU
}

// cpuUse is the JSON form of a cpuMeter's span: cores used on average.
// Others is what the rest of the machine used (Linux only; -1 if unknown):
// on a shared machine, a run where others took much is not comparable.
type cpuUse struct {
	Server float64 `json:"server_cores"`
	Bench  float64 `json:"bench_cores"`
	Others float64 `json:"others_cores"`
}

func (c cpuUse) String() string {
	if c.Server == 0 && c.Bench == 0 {
		return "-"
	}
	s := fmt.Sprintf("server %.2f cores, bench %.2f cores", c.Server, c.Bench)
	if c.Others >= 0 {
		s += fmt.Sprintf(", other processes %.2f cores", c.Others)
	}
	return s
}

// machineCPU is the machine's busy and total CPU time from /proc/stat, in
// clock ticks; ok is false where there is no /proc/stat.
type machineCPU struct {
	busy, total float64
	cpus        int
	ok          bool
}

func readMachineCPU() machineCPU {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineCPU{}
	}
	var m machineCPU
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 5 && f[0] == "cpu":
			for i, v := range f[1:] {
				n, _ := strconv.ParseFloat(v, 64)
				if i < 8 { // user … steal; guest time is counted in user
					m.total += n
					if i != 3 && i != 4 { // idle, iowait
						m.busy += n
					}
				}
			}
			m.ok = true
		case len(f) > 0 && strings.HasPrefix(f[0], "cpu"):
			m.cpus++
		}
	}
	return m
}

// cores is the cores the whole machine used between m and later.
func (m machineCPU) cores(later machineCPU) (float64, bool) {
	dt := later.total - m.total
	if !m.ok || !later.ok || dt <= 0 || m.cpus == 0 {
		return 0, false
	}
	return (later.busy - m.busy) / dt * float64(m.cpus), true
}

// perCore is a rate per server core, if the server's CPU is known.
func perCore(rate, cores float64) string {
	if cores <= 0 {
		return "-"
	}
	return fmtRate(math.Round(rate / cores))
}

// startCPU starts measuring CPU use; a server without process metrics
// gives no figure, not an error.
func (b *bencher) startCPU(ctx context.Context) cpuMeter {
	m, err := b.metrics(ctx)
	if err != nil {
		fmt.Fprintf(b.stderr, "the server's CPU use is unknown: %v\n", err)
	}
	return cpuMeter{at: time.Now(), server: m.cpu, client: selfCPU(), ok: err == nil && m.hasCPU, machine: readMachineCPU()}
}

// stop returns the cores used since start.
func (c cpuMeter) stop(ctx context.Context, b *bencher) cpuUse {
	el := time.Since(c.at).Seconds()
	if el <= 0 {
		return cpuUse{}
	}
	machine, machineOK := c.machine.cores(readMachineCPU())
	bench := (selfCPU() - c.client) / el
	u := cpuUse{Bench: round2(bench), Others: -1}
	if m, err := b.metrics(ctx); err != nil {
		fmt.Fprintf(b.stderr, "the server's CPU use is unknown: %v\n", err)
	} else if c.ok {
		server := (m.cpu - c.server) / el
		u.Server = round2(server)
		if machineOK && b.serverIsLocal() {
			u.Others = round2(max(machine-server-bench, 0))
		}
	}
	return u
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

// serverIsLocal reports whether the server runs on this machine (a
// loopback address), so that the machine's CPU use includes it.
func (b *bencher) serverIsLocal() bool {
	u, err := url.Parse(b.c.server)
	if err != nil {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}
