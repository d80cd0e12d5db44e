// Command natsdev runs an embedded nats-server with JetStream, for
// development, tests and benchmarks of `tether serve --store nats://...`
// on a machine without a nats-server binary. It is not for production: run
// the real nats-server there (docs/operations.md).
//
//	go run ./internal/natsdev [-port 4222] [-dir D] [-servers 3] [-max-payload 8MiB]
//
// It stores JetStream's files under -dir (by default a temporary
// directory, removed at exit), prints the client URL (with -servers 3, the
// three URLs of a cluster of three servers in this one process, separated
// by commas: what --store takes) on a line of its own once JetStream is
// ready, and runs until it gets SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "natsdev:", err)
		os.Exit(1)
	}
}

func run() error {
	port := flag.Int("port", 4222, "client port of the first server (0: any free port); the others take the next ones")
	dir := flag.String("dir", "", "JetStream's directory (default: a temporary one, removed at exit)")
	servers := flag.Int("servers", 1, "servers: 1, or 3 for a JetStream cluster (R3 streams) on this machine")
	maxPayload := flag.Int("max-payload", 8<<20, "largest message in bytes (a Tether batch is one message)")
	verbose := flag.Bool("v", false, "log the servers' notices")
	flag.Parse()
	if *servers < 1 {
		return errors.New("-servers must be at least 1")
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "natsdev-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		*dir = d
	}

	ports := make([]int, *servers)
	clusterPorts := make([]int, *servers)
	routes := make([]string, *servers)
	for i := range ports {
		switch {
		case *port == 0:
			p, err := freePort()
			if err != nil {
				return err
			}
			ports[i] = p
		default:
			ports[i] = *port + i
		}
	}
	if *servers > 1 {
		for i := range routes {
			p, err := freePort()
			if err != nil {
				return err
			}
			clusterPorts[i] = p
			routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
		}
	}
	var srvs []*server.Server
	defer func() {
		for _, s := range srvs {
			s.Shutdown()
			s.WaitForShutdown()
		}
	}()
	urls := make([]string, *servers)
	for i := range *servers {
		name := fmt.Sprintf("natsdev-%d", i+1)
		o := &server.Options{
			ServerName: name, Host: "127.0.0.1", Port: ports[i],
			JetStream: true, StoreDir: filepath.Join(*dir, name),
			MaxPayload: int32(*maxPayload), NoSigs: true, NoLog: !*verbose,
		}
		if *servers > 1 {
			o.Cluster = server.ClusterOpts{Name: "natsdev", Host: "127.0.0.1", Port: clusterPorts[i]}
			o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		}
		s, err := server.NewServer(o)
		if err != nil {
			return err
		}
		if *verbose {
			s.ConfigureLogger()
		}
		go s.Start()
		srvs = append(srvs, s)
		if !s.ReadyForConnections(10 * time.Second) {
			return fmt.Errorf("server %s did not start", name)
		}
		urls[i] = s.ClientURL()
	}
	url := strings.Join(urls, ",")
	if err := waitReady(url, *servers); err != nil {
		return err
	}
	fmt.Println(url)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	return nil
}

// waitReady waits until JetStream places a stream of as many replicas as
// there are servers (a cluster has elected its meta leader and knows its
// peers).
func waitReady(url string, replicas int) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := probe(url, replicas)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("JetStream is not ready: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func probe(url string, replicas int) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	name := "NATSDEV_PROBE"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"natsdev.probe"}, Replicas: replicas}); err != nil {
		return err
	}
	return js.DeleteStream(ctx, name)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
