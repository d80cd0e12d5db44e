package durablestreams_test

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherhq/tether/api/durablestreams"
)

// BenchmarkCatchUp reads a JSON stream of about n MiB whole in one catch-up
// answer over HTTP (SQLite store), and reports the peak of the heap in use
// while it does (sampled every 5 ms), which stays near the 1 MiB
// the read keeps in memory plus one page, whatever the size.
func BenchmarkCatchUp(b *testing.B) {
	for _, mib := range []int{5, 60} {
		b.Run(fmt.Sprintf("%dMiB", mib), func(b *testing.B) {
			s := newServer(b, durablestreams.Options{})
			s.do("PUT", "j", "", "Content-Type", "application/json")
			msg := fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", 1040))
			batch := "[" + strings.Repeat(msg+",", 999) + msg + "]" // about 1 MiB
			for range mib {
				resp, body := s.do("POST", "j", batch, "Content-Type", "application/json")
				s.want(resp, body, 204)
			}
			var peak atomic.Uint64
			stop := make(chan struct{})
			done := make(chan struct{})
			runtime.GC()
			var base runtime.MemStats
			runtime.ReadMemStats(&base)
			go func() {
				defer close(done)
				var ms runtime.MemStats
				for {
					select {
					case <-stop:
						return
					case <-time.After(5 * time.Millisecond):
					}
					runtime.ReadMemStats(&ms)
					if ms.HeapInuse > peak.Load() {
						peak.Store(ms.HeapInuse)
					}
				}
			}()
			b.ResetTimer()
			var n int64
			for b.Loop() {
				resp, err := http.Get(s.URL + durablestreams.Prefix + "j?offset=-1")
				if err != nil {
					b.Fatal(err)
				}
				n, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.Header.Get("Stream-Up-To-Date") != "true" || n < int64(mib)<<20 {
					b.Fatalf("read %d bytes, %v", n, resp.Header)
				}
			}
			b.StopTimer()
			close(stop)
			<-done
			b.SetBytes(n)
			b.ReportMetric(float64(peak.Load()-min(peak.Load(), base.HeapInuse))/(1<<20), "peak-heap-MiB")
		})
	}
}
