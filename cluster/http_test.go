package cluster

import (
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
	"github.com/tetherhq/tether/internal/ssetest"
)

// endpoint is a Tether node as its HTTP clients see it.
type endpoint struct {
	name string
	URL  string
	hc   *http.Client
}

func newEndpoint(name, u string) endpoint {
	return endpoint{name: name, URL: u, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

// call makes one request with a JSON body (if body is not nil) and returns
// the status, the body and the headers of the answer.
func (p *endpoint) call(ctx context.Context, method, path string, body any, header ...string) (int, []byte, http.Header, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return 0, nil, nil, err
		}
		rd = bytes.NewReader(j)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, p.URL+path, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header, err
}

// mustCall is call that fails the test unless the status is want; it
// decodes the answer into out if out is not nil.
func (p *endpoint) mustCall(t testing.TB, method, path string, body any, want int, out any, header ...string) {
	t.Helper()
	status, b, _, err := p.call(context.Background(), method, path, body, header...)
	if err != nil {
		t.Fatalf("%s: %s %s: %v", p.name, method, path, err)
	}
	if status != want {
		t.Fatalf("%s: %s %s: status %d, want %d: %s", p.name, method, path, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %s %s: decode %s: %v", p.name, method, path, b, err)
		}
	}
}

func (p *endpoint) createThread(t testing.TB, id string) {
	t.Helper()
	p.mustCall(t, "POST", "/v1/threads", map[string]any{"id": id}, http.StatusCreated, nil)
}

// demoRun creates a demo run on thread tid, with the demo options opts (a
// JSON object), and returns it.
func (p *endpoint) demoRun(t testing.TB, tid, prompt, opts string) tether.Run {
	t.Helper()
	body := `{"agent":"demo","input":{"messages":[{"role":"user","content":` + quote(prompt) + `}]},"metadata":{"demo":` + opts + `}}`
	var r tether.Run
	p.mustCall(t, "POST", "/v1/threads/"+tid+"/runs", body, http.StatusCreated, &r)
	return r
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// getRun returns a run as GET /v1/runs/{id} shows it.
func (p *endpoint) getRun(t testing.TB, rid string) tether.Run {
	t.Helper()
	var body struct {
		Run tether.Run `json:"run"`
	}
	p.mustCall(t, "GET", "/v1/runs/"+rid, nil, http.StatusOK, &body)
	return body.Run
}

// waitRun polls until cond holds for the run, and returns it.
func (p *endpoint) waitRun(t testing.TB, rid string, timeout time.Duration, what string, cond func(tether.Run) bool) tether.Run {
	t.Helper()
	var r tether.Run
	eventually(t, timeout, fmt.Sprintf("%s: run %s %s", p.name, rid, what), func() bool {
		r = p.getRun(t, rid)
		return cond(r)
	})
	return r
}

func (p *endpoint) finalAnswer(t testing.TB, tid string) tether.FinalAnswer {
	t.Helper()
	var fa tether.FinalAnswer
	p.mustCall(t, "GET", "/v1/threads/"+tid+"/final-answer", nil, http.StatusOK, &fa)
	return fa
}

// logEvent is an event of a log as the JSON catch-up returns it.
type logEvent struct {
	Offset string `json:"offset"`
	Type   string `json:"type"`
	RunID  string `json:"run_id"`
	Delta  string `json:"delta"`
	Status string `json:"status"`
	Error  *struct {
		Code string `json:"code"`
	} `json:"error"`
	Raw []byte `json:"-"`
}

// readLog reads a whole log (path is a thread's or a run's events) with
// the JSON catch-up, page after page.
func (p *endpoint) readLog(t testing.TB, path string) []logEvent {
	t.Helper()
	var out []logEvent
	after := string(tether.OffsetStart)
	for {
		var body struct {
			Events   []json.RawMessage `json:"events"`
			Next     string            `json:"next_offset"`
			UpToDate bool              `json:"up_to_date"`
			Done     bool              `json:"done"`
		}
		p.mustCall(t, "GET", path+"?after="+url.QueryEscape(after), nil, http.StatusOK, &body, "Accept", "application/json")
		for _, raw := range body.Events {
			var e logEvent
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatalf("%s: read %s: event %s: %v", p.name, path, raw, err)
			}
			e.Raw = raw
			out = append(out, e)
		}
		switch {
		case body.UpToDate || body.Done:
			return out
		case body.Next == after:
			t.Fatalf("%s: read %s: next_offset %s does not move", p.name, path, after)
		}
		after = body.Next
	}
}

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
func (p *endpoint) openStream(ctx context.Context, path, lastID string) (*stream, error) {
	st, err := ssetest.Open(ctx, p.hc, p.URL+path, lastID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	return &stream{st}, nil
}

// next returns the next frame or comment; a frame cut before its blank
// line is dropped, as a browser would.
func (st *stream) next() (frame, error) { return st.Next() }

// close cuts the connection.
func (st *stream) close() { st.Close() }

// eventOf checks an event frame and returns its event.
func eventOf(f frame) (seenEvent, error) { return ssetest.EventOf(f) }

// sameSequence fails the test unless got is exactly want (offsets, types
// and bytes), naming the first difference.
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
		case got[i].Offset != want[i].Offset || !bytes.Equal(got[i].Data, want[i].Raw):
			t.Errorf("%s: event #%d is %s %s\n  %s\nwant %s %s\n  %s", who, i, got[i].Offset, got[i].Type, got[i].Data, want[i].Offset, want[i].Type, want[i].Raw)
			return
		}
	}
}

// sameLog fails the test unless two reads of a log are identical.
func sameLog(t testing.TB, who string, got, want []logEvent) {
	t.Helper()
	seen := make([]seenEvent, len(got))
	for i, e := range got {
		seen[i] = seenEvent{Offset: e.Offset, Type: e.Type, Data: e.Raw}
	}
	sameSequence(t, who, seen, want)
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

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
