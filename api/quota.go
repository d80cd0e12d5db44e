package api

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api/durablestreams"
)

// quotas holds each principal's counters (Limits), keyed by quotaKey.
type quotas struct {
	lim Limits
	now func() time.Time

	mu        sync.Mutex
	m         map[string]*principal
	lastSweep time.Time

	// refused counts refusals by limit: threads, runs, appends,
	// append_bytes, streams, body_budget, body_share.
	refused *prometheus.CounterVec
}

// principal is one principal's counters. Its buckets are nil when their
// limit is off.
type principal struct {
	threads, runs, appends, bytes *rate.Limiter
	streams                       int // open; guarded by quotas.mu
}

// overflowKey is the principal of every new key while MaxPrincipals are
// held and none is idle.
const overflowKey = "overflow"

// sweepEvery is how often idle principals are dropped.
const sweepEvery = time.Minute

func newQuotas(lim Limits, now func() time.Time) *quotas {
	if now == nil {
		now = time.Now
	}
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tether_limited_total", Help: "Requests refused by a limit (429, or 503 for body_budget and body_share), by limit.",
	}, []string{"limit"})
	for _, l := range limitLabels {
		refused.WithLabelValues(l)
	}
	return &quotas{lim: lim, now: now, m: make(map[string]*principal), lastSweep: now(), refused: refused}
}

// limitLabels are the values of tether_limited_total's label. Each is
// served from the start, at 0: a series that appears at its first refusal
// hides that refusal from rate() and increase().
var limitLabels = []string{"threads", "runs", "appends", "append_bytes", "streams", "body_budget", "body_share"}

// limitCollectors returns the limits' metrics: refusals, principals held,
// and the bytes of the body budget in use.
func (s *Server) limitCollectors() []prometheus.Collector {
	return []prometheus.Collector{s.quotas.refused,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tether_limit_principals", Help: "Principals whose limit counters are held."},
			func() float64 { return float64(s.quotas.size()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tether_body_bytes_in_flight", Help: "Request-body bytes taken from the budget (--max-body-in-flight)."},
			func() float64 {
				if s.budget == nil {
					return 0
				}
				return float64(s.budget.inUse())
			}),
	}
}

func bucket(r Rate) *rate.Limiter {
	if !r.on() {
		return nil
	}
	return rate.NewLimiter(rate.Limit(r.PerSecond), r.Burst)
}

// get returns key's counters, making them if need be.
func (q *quotas) get(key string) *principal {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.getLocked(key)
}

// getLocked is get with q.mu held.
func (q *quotas) getLocked(key string) *principal {
	now := q.now()
	if now.Sub(q.lastSweep) >= sweepEvery {
		q.sweep(now)
	}
	if p, ok := q.m[key]; ok {
		return p
	}
	if len(q.m) >= q.lim.MaxPrincipals {
		q.sweep(now)
		if len(q.m) >= q.lim.MaxPrincipals {
			key = overflowKey
			if p, ok := q.m[key]; ok {
				return p
			}
		}
	}
	p := &principal{threads: bucket(q.lim.Threads), runs: bucket(q.lim.Runs),
		appends: bucket(q.lim.Appends), bytes: bucket(q.lim.AppendBytes)}
	q.m[key] = p
	return p
}

// sweep drops the principals that are idle: no stream open and every
// bucket full, so that dropping them forgets nothing. q.mu is held.
func (q *quotas) sweep(now time.Time) {
	q.lastSweep = now
	for k, p := range q.m {
		if p.streams == 0 && full(p.threads, now) && full(p.runs, now) && full(p.appends, now) && full(p.bytes, now) {
			delete(q.m, k)
		}
	}
}

func full(l *rate.Limiter, now time.Time) bool {
	return l == nil || l.TokensAt(now) >= float64(l.Burst())
}

// size returns the number of principals held.
func (q *quotas) size() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.m)
}

// take takes n tokens from l now, or returns how long until they would be
// there and takes nothing. What it took is returned so that a request
// refused later gives its tokens back (giveBack).
func (q *quotas) take(l *rate.Limiter, n int) (taken, time.Duration) {
	if l == nil || n <= 0 {
		return taken{}, 0
	}
	now := q.now()
	n = min(n, l.Burst())
	res := l.ReserveN(now, n)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return taken{}, d
	}
	return taken{res, now}, 0
}

// taken is tokens taken from a bucket, and when.
type taken struct {
	res *rate.Reservation
	at  time.Time
}

// giveBack returns the tokens. A reservation is cancelled at the time it
// was made: rate.Reservation.CancelAt restores nothing once its time to
// act has passed, which, for tokens taken without waiting, is at once.
func (t taken) giveBack() {
	if t.res != nil {
		t.res.CancelAt(t.at)
	}
}

// openStream counts one more stream of key's, unless it holds
// Limits.Streams already. The function returned counts it closed.
func (q *quotas) openStream(key string) (closeStream func(), ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	// Under one lock with the count, so that a sweep cannot drop the
	// principal between the two.
	p := q.getLocked(key)
	if q.lim.Streams > 0 && p.streams >= q.lim.Streams {
		return nil, false
	}
	p.streams++
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			p.streams--
			q.mu.Unlock()
		})
	}, true
}

// limitKind is which of a principal's limits a route counts against.
type limitKind uint8

const (
	limitNone    limitKind = iota
	limitCreate            // a thread or a Durable Stream
	limitRun               // a run, answered with its stream
	limitRunOnly           // a run, answered with JSON
	limitAppend            // events or stream data
)

// limitOf returns the limit of a route pattern; the Durable Streams
// prefix is told by method and path (limitOfStream).
func limitOf(pattern string) limitKind {
	switch pattern {
	case "POST /v1/threads":
		return limitCreate
	case "POST /v1/threads/{tid}/runs":
		return limitRunOnly
	case "POST /v1/threads/{tid}/runs/stream", "POST /v1/ag-ui/{agent}", "POST /v1/ai-sdk/{agent}/chat":
		return limitRun
	case "POST /v1/runs/{rid}/events":
		return limitAppend
	}
	return limitNone
}

func limitOfStream(r *http.Request) limitKind {
	if strings.HasPrefix(r.URL.Path, durablestreams.Prefix+"__ds/") {
		return limitNone
	}
	switch r.Method {
	case http.MethodPut:
		return limitCreate
	case http.MethodPost:
		return limitAppend
	}
	return limitNone
}

// reqQuota is what the limits of one request hold, on its context.
type reqQuota struct {
	key string
	// stream is set when the request is counted as a stream from its
	// start: a POST that answers with a stream is refused before it
	// creates its run, not after. closeStream ends that count; holdStream
	// hands it to the stream (handed), which may outlive the handler (a
	// connection taken over), so that it counts until the stream ends.
	stream      bool
	closeStream func()
	handed      bool
	// releaseBody gives the body's bytes back to the budget once the
	// request has become a stream.
	releaseBody func()
}

type reqQuotaCtx struct{}

func reqQuotaOf(r *http.Request) *reqQuota {
	rq, _ := r.Context().Value(reqQuotaCtx{}).(*reqQuota)
	return rq
}

// limit enforces the principal's limits of a route and the budget of
// bodies in flight, before its handler runs: a request refused here has
// written nothing. It runs inside guard, which has let the request in.
func (s *Server) limit(pattern string, h http.Handler) http.Handler {
	kind := limitOf(pattern)
	streams := pattern == durablestreams.Prefix
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := kind
		if streams {
			kind = limitOfStream(r)
		}
		rq := &reqQuota{key: quotaKey(r), releaseBody: func() {}}
		var took []taken
		refuse := func(err error, after time.Duration) {
			for _, t := range took {
				t.giveBack()
			}
			setRetryAfter(w, after)
			s.writeError(w, r, err)
		}
		if rq.key != "" && kind != limitNone {
			p := s.quotas.get(rq.key)
			check := func(l *rate.Limiter, n int, limit, what string) bool {
				t, d := s.quotas.take(l, n)
				if d > 0 {
					s.quotas.refused.WithLabelValues(limit).Inc()
					refuse(tether.Errorf(tether.CodeRateLimited, "too many %s: retry in %s", what, retryAfter(d)), d)
					return false
				}
				took = append(took, t)
				return true
			}
			switch kind {
			case limitCreate:
				if !check(p.threads, 1, "threads", "threads and streams created") {
					return
				}
			case limitRun, limitRunOnly:
				if !check(p.runs, 1, "runs", "runs started") {
					return
				}
			case limitAppend:
				n := int(min(r.ContentLength, s.opts.MaxBodyBytes))
				if !check(p.appends, 1, "appends", "appends") || !check(p.bytes, n, "append_bytes", "bytes appended") {
					return
				}
				if r.ContentLength < 0 && p.bytes != nil {
					// A body of unknown length is charged once read, as a
					// debt the next requests wait for.
					cb := &countedBody{ReadCloser: r.Body}
					r.Body = cb
					defer func() { p.bytes.ReserveN(s.quotas.now(), min(int(cb.n), p.bytes.Burst())) }()
				}
			}
			if kind == limitRun {
				closeStream, ok := s.quotas.openStream(rq.key)
				if !ok {
					s.quotas.refused.WithLabelValues("streams").Inc()
					refuse(errTooManyStreams(s.opts.Limits.Streams), time.Second)
					return
				}
				rq.stream, rq.closeStream = true, closeStream
				defer func() {
					if !rq.handed {
						closeStream()
					}
				}()
			}
		}
		if s.budget != nil && r.ContentLength != 0 && r.Method != http.MethodGet && r.Method != http.MethodHead {
			n := r.ContentLength
			if n < 0 || n > s.opts.MaxBodyBytes {
				n = s.opts.MaxBodyBytes // the most a handler reads
			}
			release, ok := s.budget.tryAcquire(rq.key, n)
			var err error
			var overShare bool
			if !ok {
				// Only a request that must wait gets a deadline (a timer).
				ctx, cancel := context.WithTimeout(r.Context(), s.opts.Limits.BodyWait)
				release, overShare, err = s.budget.acquire(ctx, rq.key, n)
				cancel()
			}
			if err != nil {
				if r.Context().Err() != nil {
					return // the client left
				}
				if overShare {
					s.quotas.refused.WithLabelValues("body_share").Inc()
					refuse(shed{tether.Errorf(tether.CodeUnavailable, "this key has too many large requests in flight: retry once one is answered")}, time.Second)
					return
				}
				s.quotas.refused.WithLabelValues("body_budget").Inc()
				refuse(shed{tether.Errorf(tether.CodeUnavailable, "the server is handling too many large requests: retry")}, time.Second)
				return
			}
			defer release()
			rq.releaseBody = release
		}
		if r.ContentLength != 0 && r.Method != http.MethodGet && r.Method != http.MethodHead {
			// The body must arrive within BodyTimeout of now (the
			// budget's wait above is not counted against it).
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(s.opts.Limits.BodyTimeout)) == nil {
				db := &deadlineBody{ReadCloser: r.Body, rc: rc}
				r.Body = db
				release := rq.releaseBody
				rq.releaseBody = func() { release(); db.clear() }
			}
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), reqQuotaCtx{}, rq)))
	})
}

// holdStream counts the request as one of its principal's open streams
// (Limits.Streams) until the function returned is called, and gives its
// body's bytes back to the budget: a stream's body has been dealt with.
// Over the limit it answers 429 rate_limited itself and returns ok false.
func (s *Server) holdStream(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	markStreamed(r)
	rq := reqQuotaOf(r)
	if rq == nil {
		return func() {}, true
	}
	rq.releaseBody()
	if rq.stream {
		// Counted since the request came in (a run answered with its
		// stream): the count is the stream's from here.
		rq.handed = true
		return rq.closeStream, true
	}
	if rq.key == "" {
		return func() {}, true
	}
	closeStream, ok := s.quotas.openStream(rq.key)
	if !ok {
		s.quotas.refused.WithLabelValues("streams").Inc()
		setRetryAfter(w, time.Second)
		s.writeError(w, r, errTooManyStreams(s.opts.Limits.Streams))
		return nil, false
	}
	return closeStream, true
}

func errTooManyStreams(n int) error {
	return tether.Errorf(tether.CodeRateLimited, "too many streams open at once (at most %d): close one, or retry later", n)
}

// retryAfter rounds d up to whole seconds, at least 1: Retry-After's unit.
func retryAfter(d time.Duration) time.Duration {
	return time.Duration(max(1, math.Ceil(d.Seconds()))) * time.Second
}

func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int(retryAfter(d).Seconds())))
}

// countedBody counts the bytes read from a body.
type countedBody struct {
	io.ReadCloser
	n int64
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}

// deadlineBody is a request body read under a connection read deadline
// (Limits.BodyTimeout), lifted once the body is read, so that the
// deadline bounds the wait for the body and nothing after it: the server
// reads the connection in the background once a body ends, and that read
// failing at the deadline would cancel the request (a run's stream, a
// commit in progress).
type deadlineBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	cleared bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.clear()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = errBodyTimeout
		}
	}
	return n, err
}

// clear lifts the deadline. It is called from the request's handler only
// (a body is not read concurrently with holdStream).
func (b *deadlineBody) clear() {
	if !b.cleared {
		b.cleared = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
}
