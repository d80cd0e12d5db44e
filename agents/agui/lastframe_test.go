package agui_test

import (
	"net/http"
	"testing"

	tether "github.com/tetherhq/tether"
)

// TestLastFrameWithoutBlankLine: an upstream whose body ends cleanly
// right after its last event, without the blank line that ends an SSE
// frame, finishes its run: @ag-ui/client's HttpAgent reads that event
// (it parses what is left when the body ends), so an agent that works
// with it works behind Tether. The run ended upstream_disconnected, its
// RUN_FINISHED dropped. A body that ends inside an event still ends its
// run in error.
func TestLastFrameWithoutBlankLine(t *testing.T) {
	const head = "data: {\"type\":\"RUN_STARTED\"}\n\n" +
		"data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m1\",\"role\":\"assistant\"}\n\n" +
		"data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m1\",\"delta\":\"done\"}\n\n" +
		"data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m1\"}\n\n"
	for _, c := range []struct {
		name, tail string
		status     tether.RunStatus
	}{
		{"one line end", "data: {\"type\":\"RUN_FINISHED\"}\n", tether.RunDone},
		{"no line end", "data: {\"type\":\"RUN_FINISHED\"}", tether.RunDone},
		{"cut inside the event", "data: {\"type\":\"RUN_FIN", tether.RunError},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := newUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = w.Write([]byte(head + c.tail))
			})
			w := newWorld(t, u.URL)
			snap := w.wait(t, w.start(t, "", "hi"))
			if r := snap.Runs[0]; r.Status != c.status || answer(snap) != "done" {
				t.Fatalf("run %s %+v, answer %q; want %s", r.Status, r.Error, answer(snap), c.status)
			}
		})
	}
}
