package natsstore_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	"github.com/tetherhq/tether/store/natsstore"
)

// The tests' servers come from natstest: StartServer for one, StartCluster
// for a JetStream cluster of three on loopback ports.

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
