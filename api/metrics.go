package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/store"
)

// metrics are the server's Prometheus metrics, in a registry of its own so
// that several servers can live in one process (tests).
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	streams  prometheus.Gauge
	sockets  prometheus.Gauge
	slowCuts prometheus.Counter
}

func newMetrics(e *engine.Engine) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tether_http_requests_total", Help: "HTTP requests by route, method and status.",
	}, []string{"route", "method", "status"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "tether_http_request_duration_seconds", Help: "Duration of non-streaming HTTP requests.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10, 30},
	}, []string{"route"})
	m.streams = prometheus.NewGauge(prometheus.GaugeOpts{Name: "tether_sse_streams", Help: "Open SSE streams."})
	m.sockets = prometheus.NewGauge(prometheus.GaugeOpts{Name: "tether_ws_connections", Help: "Open WebSocket connections."})
	m.slowCuts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tether_slow_consumer_cuts_total", Help: "Streams ended because the client fell too far behind.",
	})
	c := e.Counters()
	counter := func(name, help string, f func() int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f()) })
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	m.reg.MustRegister(m.requests, m.latency, m.streams, m.sockets, m.slowCuts,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		counter("tether_events_committed_total", "Events committed to the store.", c.Events.Load),
		counter("tether_batches_committed_total", "Store batches committed.", c.Batches.Load),
		counter("tether_appends_total", "Appends accepted (plans committed).", c.Appends.Load),
		counter("tether_appends_rejected_total", "Appends rejected by validation.", c.Rejected.Load),
		counter("tether_commit_errors_total", "Batches the store failed to commit.", c.CommitErrors.Load),
		counter("tether_runs_aborted_total", "Runs the server ended aborted.", c.Aborted.Load),
		counter("tether_checkpoints_total", "Thread states checkpointed in the store.", c.Checkpoints.Load),
		counter("tether_recovery_errors_total", "Runs the start could not recover because their thread cannot be loaded.", c.RecoveryErrors.Load),
		gauge("tether_subscriptions", "Open subscriptions.", func() float64 { return float64(c.Subscriptions.Load()) }),
		gauge("tether_runs_queued", "Runs ready to start, waiting for a worker or an in-process slot on this node.", func() float64 { return float64(e.QueuedRuns()) }),
		gauge("tether_threads_cached", "Thread states in memory.", func() float64 { return float64(e.CachedThreads()) }),
		gauge("tether_hub_topics", "Threads with a fan-out topic.", func() float64 { return float64(e.Hub().Stats().Topics) }),
		gauge("tether_hub_ring_bytes", "Bytes held in fan-out rings.", func() float64 { return float64(e.Hub().Stats().RingBytes) }),
	)
	if d, ok := e.Store().(store.Delivery); ok {
		m.reg.MustRegister(
			gauge("tether_store_commits_awaiting_delivery", "Commits stored and waiting for this node to read them back from the shared log.",
				func() float64 { return float64(d.AwaitingDelivery()) }),
			counter("tether_store_late_deliveries_total", "Commits that waited longer than the store timeout to be read back from the shared log.", d.LateDeliveries),
		)
	}
	return m
}

// request counts a request and, unless it was answered with a stream or a
// long poll (streamed), observes its duration: streams last as long as the
// client stays, long polls as long as they wait. Which requests stream is
// told by the request (holdStream), not its route: the same route may
// answer a read at once or wait (Durable Streams, catch-up), and POST
// routes answer with a run's stream (AG-UI, the AI SDK).
func (m *metrics) request(route, method string, status int, d time.Duration, streamed bool) {
	m.requests.WithLabelValues(route, methodLabel(method), strconv.Itoa(status)).Inc()
	if streamed {
		return
	}
	m.latency.WithLabelValues(route).Observe(d.Seconds())
}

// methodLabel is a request's method as the method label counts it: the
// standard methods by name, any other as "other". The routes without a
// method in their pattern (the page, /v1/stream/) take any token a client
// sends as the method, and one series per made-up method would let a
// client without a token grow /metrics, and the server's memory, without
// bound.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "other"
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
