package api_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/streams"
)

// A Durable Streams SSE read, of a stream or of a thread's log, is an open
// SSE stream like the others: tether_sse_streams counts it while it is
// open and not after its client left. Before, it was counted nowhere, and
// a node holding thousands of them showed no stream open.
func TestDurableStreamsSSECounted(t *testing.T) {
	v := newEnvStreams(t, testutil.OpenStore(t, ""), api.Options{}, engine.Options{}, &streams.Options{})
	v.mustDo(201, "PUT", "/v1/stream/s1", "hello", "Content-Type", "text/plain")
	v.thread("t1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, path := range []string{"/v1/stream/s1", "/v1/stream/threads/t1"} {
		req, _ := http.NewRequestWithContext(ctx, "GET", v.url+path+"?offset=-1&live=sse", nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("%s: %d", path, res.StatusCode)
		}
		if _, err := bufio.NewReader(res.Body).ReadString('\n'); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		go io.Copy(io.Discard, res.Body)
	}
	if got := v.metric("tether_sse_streams"); got != 2 {
		t.Fatalf("tether_sse_streams %v with two Durable Streams SSE reads open, want 2", got)
	}
	cancel()
	testutil.Eventually(t, 10*time.Second, "tether_sse_streams back to 0 once the clients left", func() bool {
		return v.metric("tether_sse_streams") == 0
	})
}
