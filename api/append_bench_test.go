package api_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
)

// BenchmarkAppendHTTP measures one event per request through the whole
// append path of a real server (HTTP, the handler, the engine, the SQLite
// store's group commit, the answer): each of 1 or 50 producers holds the
// run of its own thread and appends one text.delta of 200 bytes per
// request, on its own keep-alive connection, waiting for each answer, as
// `tether bench --scenario append --threads 50 --batch 1 --event-bytes 200`
// does. The requests are prebuilt and written on raw connections, so that
// the client costs little beside the server in the same process. b.N
// counts requests; events/s is the figure to watch.
func BenchmarkAppendHTTP(b *testing.B) {
	for _, producers := range []int{1, 50} {
		b.Run(fmt.Sprintf("producers=%d", producers), func(b *testing.B) { benchAppendHTTP(b, producers) })
	}
}

func benchAppendHTTP(b *testing.B, producers int) {
	e, hs := benchServer(b, engine.Options{}, api.Options{})
	ctx := context.Background()

	text := strings.Repeat("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor ", 3)[:200]
	reqs := make([][]byte, producers)
	for i := range producers {
		tid := fmt.Sprintf("t%d", i)
		c := heldRun(ctx, b, e, tid)
		body := `[{"type":"text.delta","message_id":"m1","delta":` + strconv.Quote(text) + `}]`
		reqs[i] = fmt.Appendf(nil, "POST /v1/runs/%s/events HTTP/1.1\r\nHost: %s\r\nTether-Lease: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			c.Run.ID, hs.Listener.Addr(), c.Lease.Token, len(body), body)
	}

	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range producers {
		wg.Go(func() {
			conn, err := net.Dial("tcp", hs.Listener.Addr().String())
			if err != nil {
				b.Error(err)
				return
			}
			defer conn.Close()
			br := bufio.NewReader(conn)
			for next.Add(1) <= int64(b.N) {
				if _, err := conn.Write(reqs[i]); err != nil {
					b.Error(err)
					return
				}
				res, err := http.ReadResponse(br, nil)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					b.Errorf("append: %s", res.Status)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}
