package natsstore_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/natsstore/natstest"
	"github.com/tetherhq/tether/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The crash test of the suite re-executes the test binary and kills it;
// the child reaches the parent's servers through these variables.
const (
	urlEnv        = "TETHER_NATSSTORE_TEST_URL"
	clusterURLEnv = "TETHER_NATSSTORE_TEST_CLUSTER_URLS"
)

func TestConformance(t *testing.T) {
	url := os.Getenv(urlEnv)
	if url == "" {
		url = natstest.StartServer(t).ClientURL()
		t.Setenv(urlEnv, url)
	}
	storetest.Run(t, storetest.Harness{
		Open: func(t testing.TB, dir string) store.Store {
			return openStore(t, optionsFor(url, dir, 1))
		},
	})
}

// TestConformanceCluster runs the suite on a JetStream cluster of three
// servers, the stream and the bucket replicated three times; the stores
// connect to all three.
func TestConformanceCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("the suite already ran on one server")
	}
	urls := os.Getenv(clusterURLEnv)
	if urls == "" {
		urls = natstest.URLs(natstest.StartCluster(t, 3)...)
		t.Setenv(clusterURLEnv, urls)
	}
	storetest.Run(t, storetest.Harness{
		Open: func(t testing.TB, dir string) store.Store {
			return openStore(t, optionsFor(urls, dir, 3))
		},
	})
}
