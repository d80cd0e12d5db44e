package natsstore_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tetherhq/tether/store/natsstore"
)

// runServer starts an in-process nats-server with JetStream, its files
// under dir, and shuts it down when the test ends.
func runServer(tb testing.TB, dir string) *server.Server {
	tb.Helper()
	s, err := server.NewServer(&server.Options{
		ServerName: "single", Host: "127.0.0.1", Port: -1,
		JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true,
	})
	if err != nil {
		tb.Fatal(err)
	}
	start(tb, s)
	return s
}

func start(tb testing.TB, s *server.Server) {
	tb.Helper()
	go s.Start()
	tb.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(10 * time.Second) {
		tb.Fatal("nats-server did not start")
	}
}

// runCluster starts n in-process servers that form a JetStream cluster on
// loopback ports, and returns them once the cluster has a meta leader.
func runCluster(tb testing.TB, n int) []*server.Server {
	tb.Helper()
	dir := tb.TempDir()
	ports := make([]int, n)
	routes := make([]string, n)
	for i := range ports {
		ports[i] = freePort(tb)
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", ports[i])
	}
	srvs := make([]*server.Server, n)
	for i := range srvs {
		name := fmt.Sprintf("n%d", i+1)
		s, err := server.NewServer(&server.Options{
			ServerName: name, Host: "127.0.0.1", Port: -1,
			JetStream: true, StoreDir: filepath.Join(dir, name), NoLog: true, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "tether", Host: "127.0.0.1", Port: ports[i]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
		})
		if err != nil {
			tb.Fatal(err)
		}
		srvs[i] = s
		start(tb, s)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		leader, current := false, true
		for _, s := range srvs {
			leader = leader || s.JetStreamIsLeader()
			current = current && s.JetStreamIsCurrent()
		}
		if leader && current && canPlaceR3(srvs) {
			return srvs
		}
		if time.Now().After(deadline) {
			tb.Fatal("the JetStream cluster has no meta leader")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// canPlaceR3 reports whether the cluster places a stream of three replicas
// (the meta leader knows all peers to be online).
func canPlaceR3(srvs []*server.Server) bool {
	nc, err := nats.Connect(clusterURLs(srvs))
	if err != nil {
		return false
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PROBE", Subjects: []string{"probe"}, Replicas: 3}); err != nil {
		return false
	}
	return js.DeleteStream(ctx, "PROBE") == nil
}

func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func clusterURLs(srvs []*server.Server) string {
	urls := make([]string, len(srvs))
	for i, s := range srvs {
		urls[i] = s.ClientURL()
	}
	return strings.Join(urls, ",")
}

// optionsFor names the stream, subjects and bucket of the store whose
// "files" are in dir, so that the tests' stores share servers but not data.
func optionsFor(url, dir string, replicas int) natsstore.Options {
	h := fnv.New64a()
	h.Write([]byte(dir))
	id := fmt.Sprintf("%016x", h.Sum64())
	return natsstore.Options{URL: url, Stream: "T" + id, Subject: "t" + id + ".log", Replicas: replicas,
		Timeout: 20 * time.Second}
}

func openStore(tb testing.TB, opts natsstore.Options) *natsstore.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := natsstore.Open(ctx, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return st
}
