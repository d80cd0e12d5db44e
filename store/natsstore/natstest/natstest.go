// Package natstest starts in-process NATS servers with JetStream for tests:
// one server, or a cluster of several on loopback ports.
//
// Use StartServer or StartCluster, then URLs for the client URL list:
//
//	srvs := natstest.StartCluster(t, 3)
//	st, err := natsstore.Open(ctx, natsstore.Options{URL: natstest.URLs(srvs...), Replicas: 3})
//
// The servers keep their files under t.TempDir() and are shut down when the
// test ends. Stop shuts one down early (a server that dies); Restart starts
// it again on the same port and files.
//
// # Caveats
//
// A cluster's route ports are picked free and then bound, so another
// process can take one in between; StartCluster then tries again with other
// ports (three times). Restart binds the ports the server had, which
// another process may have taken meanwhile.
package natstest

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// options remembers how each server was configured, for Restart.
var (
	mu      sync.Mutex
	options = map[*server.Server]server.Options{}
)

// StartServer starts a single nats-server with JetStream and returns it
// once it accepts connections.
func StartServer(tb testing.TB) *server.Server {
	tb.Helper()
	return start(tb, server.Options{
		ServerName: "single", Host: "127.0.0.1", Port: -1,
		JetStream: true, StoreDir: tb.TempDir(), NoLog: true, NoSigs: true,
	})
}

// StartCluster starts n servers that form one JetStream cluster and returns
// them once the cluster can place a stream of n replicas.
func StartCluster(tb testing.TB, n int) []*server.Server {
	tb.Helper()
	dir := tb.TempDir()
	var srvs []*server.Server
	var err error
	// The route ports are picked before the servers bind them: another
	// process may take one in between. Then try again with others.
	for attempt := 0; attempt < 3; attempt++ {
		if srvs, err = startCluster(filepath.Join(dir, fmt.Sprint(attempt)), n); err == nil {
			break
		}
	}
	if err != nil {
		tb.Fatal(err)
	}
	for _, s := range srvs {
		tb.Cleanup(func() { stop(s) })
	}
	WaitCluster(tb, srvs...)
	return srvs
}

func startCluster(dir string, n int) ([]*server.Server, error) {
	routes := make([]string, n)
	ports := make([]int, n)
	for i := range n {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = port
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", port)
	}
	srvs := make([]*server.Server, 0, n)
	for i := range n {
		name := fmt.Sprintf("nats-%d", i+1)
		s, err := launch(server.Options{
			ServerName: name, Host: "127.0.0.1", Port: -1,
			JetStream: true, StoreDir: filepath.Join(dir, name), NoLog: true, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "tether", Host: "127.0.0.1", Port: ports[i]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
		})
		if err != nil {
			for _, s := range srvs {
				stop(s)
			}
			return nil, err
		}
		srvs = append(srvs, s)
	}
	return srvs, nil
}

// WaitCluster waits until the running servers of a cluster have a meta
// leader, are current, and can place a stream on all of them.
func WaitCluster(tb testing.TB, srvs ...*server.Server) {
	tb.Helper()
	var up []*server.Server
	for _, s := range srvs {
		if s.Running() {
			up = append(up, s)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		leader, current := false, true
		for _, s := range up {
			leader = leader || s.JetStreamIsLeader()
			current = current && s.JetStreamIsCurrent()
		}
		if leader && current && canPlace(up) {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatal("natstest: the JetStream cluster has no meta leader")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop shuts a server down, as if it died, and waits until it is gone.
func Stop(s *server.Server) {
	s.Shutdown()
	s.WaitForShutdown()
}

// Restart starts a stopped server again with the same name, ports and
// files, and returns the new server once it accepts connections. It does
// not wait for its cluster to be whole again (see WaitCluster).
func Restart(tb testing.TB, s *server.Server) *server.Server {
	tb.Helper()
	mu.Lock()
	o, ok := options[s]
	mu.Unlock()
	if !ok {
		tb.Fatal("natstest: Restart of a server natstest did not start")
	}
	if s.Running() {
		tb.Fatal("natstest: Restart of a running server")
	}
	s, err := launch(o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stop(s) })
	return s
}

// URLs returns the servers' client URLs separated by commas, as
// nats.Connect and natsstore.Options.URL take them.
func URLs(srvs ...*server.Server) string {
	urls := make([]string, len(srvs))
	for i, s := range srvs {
		urls[i] = s.ClientURL()
	}
	return strings.Join(urls, ",")
}

func start(tb testing.TB, o server.Options) *server.Server {
	tb.Helper()
	s, err := launch(o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stop(s) })
	return s
}

// launch starts a server and waits until it accepts connections. It
// remembers the server's options, with the client port it got, for
// Restart.
func launch(o server.Options) (*server.Server, error) {
	opts := o // NewServer keeps and changes what it is given
	s, err := server.NewServer(&opts)
	if err != nil {
		return nil, err
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		Stop(s)
		return nil, fmt.Errorf("natstest: nats-server %s did not start", o.ServerName)
	}
	if a, ok := s.Addr().(*net.TCPAddr); ok {
		o.Port = a.Port
	}
	mu.Lock()
	options[s] = o
	mu.Unlock()
	return s, nil
}

// stop stops a server and forgets it, when its test ends.
func stop(s *server.Server) {
	Stop(s)
	mu.Lock()
	delete(options, s)
	mu.Unlock()
}

// canPlace reports whether the cluster places a stream with a replica on
// every server (the meta leader knows all of them to be online).
func canPlace(srvs []*server.Server) bool {
	nc, err := nats.Connect(URLs(srvs...))
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
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PROBE", Subjects: []string{"natstest.probe"}, Replicas: len(srvs)}); err != nil {
		return false
	}
	return js.DeleteStream(ctx, "PROBE") == nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
