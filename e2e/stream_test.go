package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
)

// frame is one Server-Sent Events frame, or one comment line.
type frame struct {
	Comment   string // the text of a comment line (":ok" gives "ok")
	IsComment bool
	Event     string
	ID        string
	HasID     bool
	Data      string
}

// stream is one open SSE response, read frame by frame. It is a
// deliberately plain reader (LF line endings, as the server writes), not
// the client package's, so that the tests check the wire, not the client.
type stream struct {
	resp   *http.Response
	br     *bufio.Reader
	cancel context.CancelFunc
}

// openStream GETs path as an event stream, with Last-Event-ID if lastID is
// set. A status other than 200 is an error.
func (s *server) openStream(ctx context.Context, path, lastID string) (*stream, error) {
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	// Ask for gzip ourselves, so that the transport would not hide a
	// compressed stream by decompressing it.
	req.Header.Set("Accept-Encoding", "gzip")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("GET %s: status %d: %s", path, resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("GET %s: Content-Type %q", path, ct)
	}
	h := resp.Header
	if h.Get("Cache-Control") != "no-cache, no-transform" || h.Get("X-Accel-Buffering") != "no" || h.Get("Content-Encoding") != "" {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("GET %s: headers Cache-Control %q, X-Accel-Buffering %q, Content-Encoding %q; want no-cache, no-transform; no; none",
			path, h.Get("Cache-Control"), h.Get("X-Accel-Buffering"), h.Get("Content-Encoding"))
	}
	return &stream{resp: resp, br: bufio.NewReaderSize(resp.Body, 64<<10), cancel: cancel}, nil
}

// next returns the next frame or comment. A frame cut before its blank
// line is dropped, as a browser would.
func (st *stream) next() (frame, error) {
	var f frame
	fields := false
	var data []string
	for {
		line, err := st.br.ReadString('\n')
		if err != nil {
			return frame{}, err // an unfinished frame is dropped
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if !fields {
				continue
			}
			f.Data = strings.Join(data, "\n")
			return f, nil
		case line[0] == ':':
			if !fields {
				return frame{IsComment: true, Comment: strings.TrimPrefix(line[1:], " ")}, nil
			}
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		fields = true
		switch name {
		case "event":
			f.Event = value
		case "id":
			f.ID, f.HasID = value, true
		case "data":
			data = append(data, value)
		}
	}
}

// close cuts the connection (the body is closed before its end).
func (st *stream) close() {
	st.cancel()
	st.resp.Body.Close()
}

// seenEvent is an event as a client received it.
type seenEvent struct {
	Offset string
	Type   string
	Data   []byte
}

// eventOf checks an event frame (id equals the data's offset, event equals
// its type) and returns it.
func eventOf(f frame) (seenEvent, error) {
	var e struct {
		Offset string `json:"offset"`
		Type   string `json:"type"`
	}
	if err := json.Unmarshal([]byte(f.Data), &e); err != nil {
		return seenEvent{}, fmt.Errorf("event %q: data is not JSON: %v: %.200s", f.Event, err, f.Data)
	}
	if !f.HasID || f.ID != e.Offset {
		return seenEvent{}, fmt.Errorf("event %q: id %q (set: %v) is not its offset %q", f.Event, f.ID, f.HasID, e.Offset)
	}
	if f.Event != e.Type {
		return seenEvent{}, fmt.Errorf("frame event %q carries an event of type %q", f.Event, e.Type)
	}
	return seenEvent{Offset: e.Offset, Type: e.Type, Data: []byte(f.Data)}, nil
}

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
