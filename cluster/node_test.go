package cluster

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/agents/demo"
	"github.com/tetherhq/tether/agents/runner"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/store/natsstore"
	"github.com/tetherhq/tether/store/natsstore/natstest"
)

// jetStream is a JetStream cluster of three in-process servers.
type jetStream struct {
	srvs []*server.Server
	urls string // the client URLs, comma-separated
}

func startJetStream(t testing.TB) *jetStream {
	t.Helper()
	srvs := natstest.StartCluster(t, 3)
	return &jetStream{srvs: srvs, urls: natstest.URLs(srvs...)}
}

// names returns a stream name and subject prefix of the test's own, so
// that tests never share a log even on one cluster.
func names(t testing.TB) (stream, subject string) {
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	id := fmt.Sprintf("%016x", h.Sum64())
	return "T" + id, "t" + id + ".log"
}

// node is one in-process Tether node: its own store (connection) on the
// shared stream, its engine, a runner with the demo agent, and the API
// over httptest, as tether serve wires them.
type node struct {
	endpoint
	id  string
	st  *natsstore.Store
	e   *engine.Engine
	rn  *runner.Runner
	srv *api.Server
	hs  *httptest.Server

	stopOnce sync.Once
}

type nodeOptions struct {
	URL           string        // of NATS; defaults to every server of the cluster
	LeaseTTL      time.Duration // defaults to 5s
	SweepInterval time.Duration // defaults to 100ms
	StoreTimeout  time.Duration // natsstore.Options.Timeout; defaults to its default (10s)
	Replicas      int           // of the stream and the bucket; defaults to 3
	// SubscribeTimeout is api.Options.SubscribeTimeout; defaults to its
	// default (5s).
	SubscribeTimeout time.Duration
	// TombstoneTTL is natsstore.Options.TombstoneTTL; defaults to its
	// default (24h).
	TombstoneTTL time.Duration
}

// startNode starts node id on js; it stops when the test ends.
func startNode(t testing.TB, js *jetStream, id string, o nodeOptions) *node {
	t.Helper()
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 5 * time.Second
	}
	if o.SweepInterval == 0 {
		o.SweepInterval = 100 * time.Millisecond
	}
	if o.URL == "" {
		o.URL = js.urls
	}
	if o.Replicas == 0 {
		o.Replicas = 3
	}
	stream, subject := names(t)
	// The node's log goes to the test's output if it fails (or with
	// TETHER_CLUSTER_LOG=1).
	out := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", id)
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("TETHER_CLUSTER_LOG") == "1" {
			t.Logf("node %s log:\n%s", id, out.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := natsstore.Open(ctx, natsstore.Options{URL: o.URL, Stream: stream, Subject: subject, Replicas: o.Replicas,
		Node: id, Logger: log, Timeout: o.StoreTimeout, TombstoneTTL: o.TombstoneTTL})
	if err != nil {
		t.Fatalf("node %s: open store: %v", id, err)
	}
	local := map[string]agents.Agent{demo.Name: demo.New()}
	e := engine.New(st, engine.Options{NodeID: id, LeaseTTL: o.LeaseTTL, SweepInterval: o.SweepInterval, Logger: log,
		// As tether serve: in-process agents, and the names workers ask for.
		AcceptAgent: func(name string) bool { return local[name] != nil }})
	if err := e.Start(ctx); err != nil {
		st.Close()
		t.Fatalf("node %s: start engine: %v", id, err)
	}
	rn := runner.New(e, local, runner.Options{Logger: log})
	rn.Start()
	srv := api.New(e, api.Options{Logger: log, Heartbeat: time.Second, SubscribeTimeout: o.SubscribeTimeout})
	hs := httptest.NewServer(srv.Handler())
	n := &node{endpoint: newEndpoint(id, hs.URL), id: id, st: st, e: e, rn: rn, srv: srv, hs: hs}
	t.Cleanup(n.stop)
	return n
}

// stop shuts the node down as tether serve does on SIGTERM, with no grace
// for in-process runs.
func (n *node) stop() {
	n.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_ = n.rn.Shutdown(ctx)
		n.srv.Shutdown()
		n.hc.CloseIdleConnections()
		n.hs.Close()
		// Engine.Close waits for a sweep in progress, which may be stuck
		// for its whole 30s timeout on a request to a NATS server that
		// died (TestNATSServerKilledMidRun); closing the store's
		// connection ends such a request at once.
		closed := make(chan struct{})
		go func() { _ = n.e.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(500 * time.Millisecond):
		}
		_ = n.st.Close()
		<-closed
	})
}

// startNodes starts count nodes named a, b, c… on js.
func startNodes(t testing.TB, js *jetStream, count int, o nodeOptions) []*node {
	t.Helper()
	nodes := make([]*node, count)
	for i := range nodes {
		nodes[i] = startNode(t, js, string(rune('a'+i)), o)
	}
	return nodes
}
