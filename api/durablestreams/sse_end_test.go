package durablestreams_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tetherhq/tether/api/durablestreams"
	"github.com/tetherhq/tether/streams"
	"github.com/tetherhq/tether/streams/wake"
)

// An SSE response that always has data ready still ends at SSELifetime
// (the protocol's clients reconnect from their offset): the lifetime was
// counted from the end of the catch-up, so a response catching up from
// far behind read the whole stream first. A catch-up is the response with
// data always ready that a test can make without timing: 40 appends read
// one at a time, and a lifetime (1ns) already over at the first, which
// the response sends before it ends (so that a reader always makes
// progress).
func TestHTTPSSEBusyEndsAtLifetime(t *testing.T) {
	s := newServerWith(t, streams.Options{ReadBytes: 16}, wake.Options{}, durablestreams.Options{SSELifetime: time.Nanosecond})
	s.do("PUT", "busy", "", "Content-Type", "text/plain")
	for range 40 {
		resp, body := s.do("POST", "busy", "0123456789abcdef", "Content-Type", "text/plain")
		s.want(resp, body, 204)
	}
	evs, _ := sseEvents(t, s.URL+durablestreams.Prefix+"busy?offset=-1&live=sse", 1000)
	data := ""
	for _, ev := range evs {
		if ev[0] == "data" {
			data += ev[1]
		}
	}
	if n := strings.Count(data, "0123456789abcdef"); n == 0 || n > 2 {
		t.Fatalf("%d appends sent in a response whose lifetime was over at the first", n)
	}
}
