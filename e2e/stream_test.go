package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/ssetest"
)

// frame and seenEvent are the wire's frames and events.
type (
	frame     = ssetest.Frame
	seenEvent = ssetest.Event
)

// stream is one open SSE response, read frame by frame with a plain
// reader, not the client package's, so that the tests check the wire.
type stream struct{ *ssetest.Stream }

// openStream GETs path as an event stream, with Last-Event-ID if lastID is
// set. A status other than 200, or the headers of another kind of
// response, is an error.
func (s *server) openStream(ctx context.Context, path, lastID string) (*stream, error) {
	st, err := ssetest.Open(ctx, s.hc, s.URL+path, lastID)
	if err != nil {
		return nil, err
	}
	return &stream{st}, nil
}

// next returns the next frame or comment. A frame cut before its blank
// line is dropped, as a browser would.
func (st *stream) next() (frame, error) { return st.Next() }

// close cuts the connection.
func (st *stream) close() { st.Close() }

// eventOf checks an event frame and returns its event.
func eventOf(f frame) (seenEvent, error) { return ssetest.EventOf(f) }

// logEvent is an event of the server's log as the JSON catch-up returns it.
type logEvent struct {
	Offset    string `json:"offset"`
	Type      string `json:"type"`
	RunID     string `json:"run_id"`
	MessageID string `json:"message_id"`
	Delta     string `json:"delta"`
	Status    string `json:"status"`
	Raw       []byte `json:"-"`
}

// readLog reads a whole log (path is a thread's or a run's events) from
// its first event with the JSON catch-up, page after page.
func (s *server) readLog(t testing.TB, path string) []logEvent {
	t.Helper()
	log, err := s.fetchLog(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return log
}

// fetchLog is readLog that returns its error.
func (s *server) fetchLog(ctx context.Context, path string) ([]logEvent, error) {
	var out []logEvent
	after := string(tether.OffsetStart)
	for {
		status, b, err := s.call(ctx, http.MethodGet, path+"?after="+url.QueryEscape(after), nil, "Accept", "application/json")
		if err != nil || status != http.StatusOK {
			return nil, fmt.Errorf("read %s after %s: %d %v: %s", path, after, status, err, b)
		}
		var body struct {
			Events   []json.RawMessage `json:"events"`
			Next     string            `json:"next_offset"`
			UpToDate bool              `json:"up_to_date"`
			Done     bool              `json:"done"`
		}
		if err := json.Unmarshal(b, &body); err != nil {
			return nil, fmt.Errorf("read %s: %v: %.300s", path, err, b)
		}
		for _, raw := range body.Events {
			var e logEvent
			if err := json.Unmarshal(raw, &e); err != nil {
				return nil, fmt.Errorf("read %s: event %s: %v", path, raw, err)
			}
			e.Raw = raw
			out = append(out, e)
		}
		switch {
		case body.UpToDate || body.Done:
			return out, nil
		case body.Next == after:
			return nil, fmt.Errorf("read %s: next_offset %s does not move and the log is not up to date", path, after)
		}
		after = body.Next
	}
}

// logIndex maps each offset of a log to its event.
func logIndex(log []logEvent) map[string]logEvent {
	m := make(map[string]logEvent, len(log))
	for _, e := range log {
		m[e.Offset] = e
	}
	return m
}

// checkLog fails the test for every event a client saw that is not in the
// log at the same offset with the same JSON.
func checkSeenInLog(t testing.TB, who string, seen []seenEvent, idx map[string]logEvent) {
	t.Helper()
	bad := 0
	for _, e := range seen {
		l, ok := idx[e.Offset]
		switch {
		case !ok:
			t.Errorf("%s saw %s %s, which is not in the log (a phantom event)", who, e.Offset, e.Type)
		case !bytes.Equal(l.Raw, e.Data):
			t.Errorf("%s saw at %s:\n  %s\nthe log has:\n  %s", who, e.Offset, e.Data, l.Raw)
		default:
			continue
		}
		if bad++; bad > 5 {
			t.Errorf("%s: more differences left out", who)
			return
		}
	}
}

// sameSequence fails the test unless got is exactly want (offsets, types
// and JSON), naming the first difference.
func sameSequence(t testing.TB, who string, got []seenEvent, want []logEvent) {
	t.Helper()
	for i := 0; i < max(len(got), len(want)); i++ {
		switch {
		case i >= len(got):
			t.Errorf("%s: missing events from #%d: %s %s (got %d of %d)", who, i, want[i].Offset, want[i].Type, len(got), len(want))
			return
		case i >= len(want):
			t.Errorf("%s: %d extra events from #%d: %s %s", who, len(got)-len(want), i, got[i].Offset, got[i].Type)
			return
		case got[i].Offset != want[i].Offset || got[i].Type != want[i].Type:
			prev := "-1"
			if i > 0 {
				prev = got[i-1].Offset
			}
			t.Errorf("%s: event #%d is %s %s, want %s %s (after %s)", who, i, got[i].Offset, got[i].Type, want[i].Offset, want[i].Type, prev)
			return
		case !bytes.Equal(got[i].Data, want[i].Raw):
			t.Errorf("%s: event #%d at %s differs:\n  got  %s\n  want %s", who, i, got[i].Offset, got[i].Data, want[i].Raw)
			return
		}
	}
}

// eventually polls cond every 20ms until it holds, failing the test after
// timeout.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
