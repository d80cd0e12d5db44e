package api

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Limits are the rate limits each principal (quotaKey) is held to, and the
// server-wide cap on request bodies in flight. A principal's limits are
// token buckets: a burst, refilled at a steady rate. The zero value limits
// no principal (tether serve sets its flags' defaults) and caps bodies in
// flight at 2 × Options.MaxBodyBytes, a quarter of that per principal.
type Limits struct {
	// Threads bounds the threads and Durable Streams a principal creates
	// (POST /v1/threads, PUT /v1/stream/{path}). Defaults to no limit.
	Threads Rate
	// Runs bounds the runs a principal starts (POST .../runs,
	// .../runs/stream, /v1/ag-ui/{agent}, /v1/ai-sdk/{agent}/chat).
	// Defaults to no limit.
	Runs Rate
	// Appends bounds a principal's append requests (POST
	// /v1/runs/{rid}/events, POST /v1/stream/{path}). Defaults to no limit.
	Appends Rate
	// AppendBytes bounds the bytes of those requests' bodies. Its burst is
	// at least Options.MaxBodyBytes, so that the largest body allowed can
	// pass. Defaults to no limit.
	AppendBytes Rate
	// Streams bounds the long-lived requests a principal holds open at
	// once: SSE streams (every surface), WebSockets, JSON long polls
	// (?wait=), Durable Streams long polls and SSE, and claims that wait.
	// Defaults to 0: no limit.
	Streams int
	// BodyBytes caps the bytes of request bodies being handled at once,
	// over every principal: a request whose body does not fit waits for
	// room up to BodyWait, then is refused (503 unavailable). A body counts
	// by its Content-Length (by MaxBodyBytes without one) from when the
	// request is let in until it is answered or becomes a stream.
	// Defaults to 2 × Options.MaxBodyBytes; negative: no cap.
	BodyBytes int64
	// BodyBytesPerPrincipal caps the bytes of BodyBytes one principal
	// holds at once (a principal that holds none may always take one body,
	// so that any body allowed can pass): a request over it waits, as for
	// room under BodyBytes, for the principal's own bodies to be answered,
	// then is refused the same way. Without it, one client could announce
	// large bodies and send them slowly, and hold the whole budget while
	// every other principal's writes waited and failed. The principals
	// waiting for room are served in turn, one request each. Requests that
	// are not limited (quotaKey "": loopback without keys) have no share.
	// Defaults to BodyBytes / 4; negative: no cap per principal.
	BodyBytesPerPrincipal int64
	// BodyWait is how long a request waits for room under BodyBytes.
	// Defaults to 5s.
	BodyWait time.Duration
	// BodyTimeout is how long a request body may take to arrive, from
	// when the request is let in: a body still not read by then fails
	// (400 bad_request), and gives back its share of BodyBytes. Without
	// it, a client could announce a large body and never send it, and
	// hold that share for as long as it kept the connection open.
	// Defaults to 60s.
	BodyTimeout time.Duration
	// MaxPrincipals bounds the principals whose counters are held at once;
	// past it, new principals share one set of counters until idle ones
	// are dropped (a principal is idle when its buckets are full and it
	// holds no stream: dropping it forgets nothing). Defaults to 100,000.
	MaxPrincipals int
}

func (l *Limits) setDefaults(maxBody int64) {
	if l.BodyBytes == 0 {
		l.BodyBytes = 2 * maxBody
	}
	if l.BodyBytesPerPrincipal == 0 && l.BodyBytes > 0 {
		l.BodyBytesPerPrincipal = max(1, l.BodyBytes/4)
	}
	if l.BodyWait <= 0 {
		l.BodyWait = 5 * time.Second
	}
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = time.Minute
	}
	if l.MaxPrincipals <= 0 {
		l.MaxPrincipals = 100_000
	}
	if l.AppendBytes.on() && int64(l.AppendBytes.Burst) < maxBody {
		l.AppendBytes.Burst = int(maxBody)
	}
}

// Rate is a token bucket: Burst requests (or bytes) at once, refilled at
// PerSecond. The zero Rate is no limit.
type Rate struct {
	PerSecond float64
	Burst     int
}

func (r Rate) on() bool { return r.PerSecond > 0 && r.Burst > 0 }

// String returns the rate as ParseRate reads it.
func (r Rate) String() string {
	if !r.on() {
		return "0"
	}
	return strconv.FormatFloat(r.PerSecond, 'f', -1, 64) + "/s"
}

// ParseRate reads a rate as N/s, N/m or N/h: up to N at once, refilled at
// N per second, minute or hour. N is a whole number, with an optional size
// suffix (KiB, MiB, GiB) for byte rates. "0" or "" is no limit.
func ParseRate(s string) (Rate, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return Rate{}, nil
	}
	num, unit, ok := strings.Cut(s, "/")
	var per time.Duration
	switch unit {
	case "s":
		per = time.Second
	case "m":
		per = time.Minute
	case "h":
		per = time.Hour
	}
	if !ok || per == 0 {
		return Rate{}, fmt.Errorf("rate %q: want N/s, N/m or N/h (0 for no limit)", s)
	}
	mult := 1
	for _, sfx := range []struct {
		s string
		n int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if v, ok := strings.CutSuffix(num, sfx.s); ok {
			num, mult = v, sfx.n
			break
		}
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || n > (1<<40)/mult {
		return Rate{}, fmt.Errorf("rate %q: N must be a whole number", s)
	}
	if n == 0 {
		return Rate{}, nil
	}
	n *= mult
	return Rate{PerSecond: float64(n) / per.Seconds(), Burst: n}, nil
}
