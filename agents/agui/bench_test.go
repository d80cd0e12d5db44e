package agui_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
)

// BenchmarkProxy runs an upstream that streams 5000 deltas as fast as it
// can through the agent into a real SQLite store: the time per upstream
// delta, and how many Tether events the joining of deltas that arrive
// during an append leaves (events/run).
func BenchmarkProxy(b *testing.B) {
	const n = 5000
	var sb strings.Builder
	sb.WriteString("data: {\"type\":\"RUN_STARTED\"}\n\ndata: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m1\"}\n\n")
	for i := range n {
		fmt.Fprintf(&sb, "data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m1\",\"delta\":\"w%d \"}\n\n", i)
	}
	sb.WriteString("data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m1\"}\n\ndata: {\"type\":\"RUN_FINISHED\"}\n\n")
	stream := sb.String()
	u := newUpstream(b, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(stream))
	})
	w := newWorld(b, u.URL)
	events := 0
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		id := w.start(b, "", "go")
		snap := w.wait(b, id)
		if snap.Runs[0].Status != tether.RunDone {
			b.Fatalf("run %s", snap.Runs[0].Status)
		}
		b.StopTimer()
		events += len(w.log(b, id))
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/delta")
	b.ReportMetric(float64(events)/float64(b.N), "events/run")
}
