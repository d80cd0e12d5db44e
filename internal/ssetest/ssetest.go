// Package ssetest reads Server-Sent Events the plain way, for the tests
// that check Tether's wire rather than a client library: LF line endings
// (as the server writes them), frames cut before their blank line dropped
// (as a browser does).
package ssetest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Frame is one Server-Sent Events frame, or one comment line.
type Frame struct {
	IsComment bool
	Comment   string // the text of a comment line (":ok" gives "ok")
	Event     string
	ID        string
	HasID     bool
	Data      string
}

// Reader reads frames from a stream.
type Reader struct{ br *bufio.Reader }

// NewReader reads frames from r.
func NewReader(r io.Reader) *Reader { return &Reader{br: bufio.NewReaderSize(r, 64<<10)} }

// Next returns the next frame or comment. A frame cut before its blank
// line is dropped: the error of the read that cut it is returned.
func (r *Reader) Next() (Frame, error) {
	var f Frame
	fields := false
	var data []string
	for {
		line, err := r.br.ReadString('\n')
		if err != nil {
			return Frame{}, err
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
				return Frame{IsComment: true, Comment: strings.TrimPrefix(line[1:], " ")}, nil
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

// Event is a Tether event as a client received it.
type Event struct {
	Offset string
	Type   string
	Data   []byte
}

// EventOf checks a frame of a Tether event (its id is the data's offset,
// its event name the data's type) and returns the event.
func EventOf(f Frame) (Event, error) {
	var e struct {
		Offset string `json:"offset"`
		Type   string `json:"type"`
	}
	if err := json.Unmarshal([]byte(f.Data), &e); err != nil {
		return Event{}, fmt.Errorf("event %q: data is not JSON: %v: %.200s", f.Event, err, f.Data)
	}
	if !f.HasID || f.ID != e.Offset {
		return Event{}, fmt.Errorf("event %q: id %q (set: %v) is not its offset %q", f.Event, f.ID, f.HasID, e.Offset)
	}
	if f.Event != e.Type {
		return Event{}, fmt.Errorf("frame event %q carries an event of type %q", f.Event, e.Type)
	}
	return Event{Offset: e.Offset, Type: e.Type, Data: []byte(f.Data)}, nil
}

// Stream is an open SSE response, read frame by frame.
type Stream struct {
	*Reader
	Resp   *http.Response
	cancel context.CancelFunc
}

// Open GETs url as an event stream, with Last-Event-ID if lastID is set,
// and checks the response is one as Tether serves it: status 200,
// Content-Type text/event-stream, Cache-Control "no-cache, no-transform",
// X-Accel-Buffering no, and not compressed (it asks for gzip itself, so
// that the transport would not hide a compressed stream by decompressing
// it).
func Open(ctx context.Context, hc *http.Client, url, lastID string) (*Stream, error) {
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Accept-Encoding", "gzip")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := hc.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	fail := func(format string, args ...any) (*Stream, error) {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("GET %s: "+format, append([]any{req.URL.Path}, args...)...)
	}
	h := resp.Header
	switch {
	case resp.StatusCode != http.StatusOK:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fail("status %d: %s", resp.StatusCode, b)
	case h.Get("Content-Type") != "text/event-stream":
		return fail("Content-Type %q", h.Get("Content-Type"))
	case h.Get("Cache-Control") != "no-cache, no-transform" || h.Get("X-Accel-Buffering") != "no" || h.Get("Content-Encoding") != "":
		return fail("headers Cache-Control %q, X-Accel-Buffering %q, Content-Encoding %q; want no-cache, no-transform; no; none",
			h.Get("Cache-Control"), h.Get("X-Accel-Buffering"), h.Get("Content-Encoding"))
	}
	return &Stream{Reader: NewReader(resp.Body), Resp: resp, cancel: cancel}, nil
}

// Close cuts the connection (the body is closed before its end).
func (s *Stream) Close() {
	s.cancel()
	s.Resp.Body.Close()
}

// ReadResumed reads one connection of a run's stream and checks what the
// protocol promises of it: ":ok" first, then connected (or reconnect with
// reason unavailable: the store did not answer in time, and the stream
// ends at once, to be resumed like any other end); no snapshot (the
// cursor is in the log); events in increasing offsets after those already
// got. It appends the events to got and returns after run.finished
// (finished), after cutAfter events of this connection if cutAfter > 0
// (cut: the caller closes the stream), or when the stream ends or breaks.
func ReadResumed(s *Stream, got []Event, cutAfter int) (events []Event, finished, cut bool, err error) {
	n := 0
	for i := 0; ; i++ {
		f, err := s.Next()
		if err != nil {
			return got, false, false, nil // the end of the stream, or the caller's cut
		}
		switch {
		case i == 0:
			if !f.IsComment || f.Comment != "ok" {
				return got, false, false, fmt.Errorf("first frame %+v, want the :ok comment", f)
			}
		case i == 1 && f.Event == "reconnect" && strings.Contains(f.Data, `"reason":"unavailable"`):
			return got, false, false, nil
		case i == 1:
			if f.Event != "connected" {
				return got, false, false, fmt.Errorf("second frame %+v, want connected", f)
			}
		case f.IsComment || f.Event == "ping" || f.Event == "reconnect" || f.Event == "end":
			// reconnect: the server ends the stream, to be resumed like any
			// other end; end: the run subscription is complete.
		case f.Event == "snapshot":
			return got, false, false, fmt.Errorf("a snapshot (%.200s) on a stream whose cursor is in the log", f.Data)
		case f.Event == "connected":
			return got, false, false, fmt.Errorf("a second connected frame")
		default:
			e, err := EventOf(f)
			if err != nil {
				return got, false, false, err
			}
			if k := len(got); k > 0 && e.Offset <= got[k-1].Offset {
				return got, false, false, fmt.Errorf("event %s %s after %s: out of order or repeated", e.Offset, e.Type, got[k-1].Offset)
			}
			got = append(got, e)
			if e.Type == "run.finished" {
				return got, true, false, nil
			}
			if n++; n == cutAfter {
				return got, false, true, nil
			}
		}
	}
}
