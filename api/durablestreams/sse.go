package durablestreams

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"time"

	"github.com/tetherhq/tether/streams"
)

// control is the data of an SSE control event (PROTOCOL.md §5.7).
type control struct {
	StreamNextOffset string `json:"streamNextOffset"`
	StreamCursor     string `json:"streamCursor,omitempty"`
	UpToDate         bool   `json:"upToDate,omitempty"`
	StreamClosed     bool   `json:"streamClosed,omitempty"`
}

// sseWriter writes the events of one SSE response.
type sseWriter struct {
	h        *Handler
	w        http.ResponseWriter
	rc       *http.ResponseController
	rq       readQuery
	jsonMode bool
	base64   bool
	buf      bytes.Buffer
	// started is when the response started: its lifetime
	// (Options.SSELifetime) counts from there, catch-up included.
	started time.Time
}

// sse serves a read as Server-Sent Events: catch-up data, then live data,
// each data event followed by a control event with the offset after it.
// Binary streams are sent in base64 (Stream-SSE-Data-Encoding: base64).
func (h *Handler) sse(w http.ResponseWriter, r *http.Request, path string, rq readQuery) {
	done, ok := h.opts.Live(w, r)
	if !ok {
		return
	}
	defer done()
	if h.opts.OpenSSE != nil {
		defer h.opts.OpenSSE()()
	}
	started := time.Now()
	ctx := r.Context()
	var (
		res *streams.ReadResult
		in  *streams.Info
		err error
	)
	if rq.offset == streams.OffsetNow {
		in, err = h.svc.Head(ctx, path)
	} else {
		res, err = h.svc.Read(ctx, path, rq.offset)
		if res != nil {
			in = &res.Info
		}
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	sw := &sseWriter{h: h, w: w, rc: http.NewResponseController(w), rq: rq, started: started,
		jsonMode: streams.IsJSON(in.ContentType) || in.ReadOnly, base64: !streams.IsText(in.ContentType) && !in.ReadOnly}
	out := w.Header()
	out.Set("Content-Type", "text/event-stream")
	out.Set("Cache-Control", "no-cache, no-transform")
	out.Set("X-Accel-Buffering", "no")
	if sw.base64 {
		out.Set("Stream-SSE-Data-Encoding", "base64")
	}
	w.WriteHeader(http.StatusOK)

	var next string
	if res == nil {
		// offset=now: start at the tail.
		next = in.Tail
		if in.Closed {
			sw.control(next, false, true)
			sw.flush()
			return
		}
		sw.control(next, true, false)
		if !sw.flush() {
			return
		}
	} else {
		for {
			if len(res.Items) > 0 {
				sw.data(res.Items)
			}
			sw.control(res.Next, res.UpToDate, res.Closed)
			if !sw.flush() || res.Closed {
				return
			}
			next = res.Next
			if res.UpToDate {
				break
			}
			if sw.ended(r) {
				return
			}
			if res, err = h.svc.Read(ctx, path, next); err != nil {
				h.cutShort(w, r, err)
				return // end the response; the client's next request says why
			}
		}
	}

	f, err := h.svc.Follow(ctx, path, next)
	if err != nil {
		return
	}
	defer f.Close()
	life, expiring := h.untilExpiry(r, h.opts.SSELifetime-time.Since(started))
	lifetime := time.NewTimer(life)
	defer lifetime.Stop()
	keepAlive := time.NewTicker(h.opts.LongPollTimeout)
	defer keepAlive.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.opts.Stopping.Done():
			return
		case <-lifetime.C:
			if expiring {
				sw.reconnect(reasonTokenExpired)
			}
			return
		case <-keepAlive.C:
			sw.control(next, true, false)
			if !sw.flush() {
				return
			}
		case <-f.Ready():
			// Each batch is written as it comes: a follower that fell
			// behind reads the log a page at a time, and what it reads is
			// not held here, nor read on past the response's end. Its
			// batches are not up to date (Batch.More) until the last;
			// when that one was a full page, the tail is known only from
			// the empty read after it, which says so on its own.
			behind := false
			for {
				b, err := f.TryNext(ctx)
				if err != nil {
					h.cutShort(w, r, err)
					return
				}
				if b == nil {
					break
				}
				if len(b.Items) > 0 {
					sw.data(b.Items)
				}
				next, behind = b.Next, b.More
				sw.control(next, !behind, b.Closed)
				if !sw.flush() || b.Closed || sw.ended(r) {
					return
				}
			}
			if behind {
				sw.control(next, true, false)
				if !sw.flush() {
					return
				}
			}
			keepAlive.Reset(h.opts.LongPollTimeout)
		}
	}
}

// ended reports whether the response must end now: at the end of its
// lifetime, or for Options.EndDue, having written the reconnect event its
// reason asks for.
func (sw *sseWriter) ended(r *http.Request) bool {
	why := sw.h.opts.EndDue(r)
	if why == reasonTokenExpired {
		sw.reconnect(why)
	}
	return why != "" || time.Since(sw.started) >= sw.h.opts.SSELifetime
}

// reconnect writes a reconnect event of reason (an event the protocol's
// clients skip as unknown; they reconnect when the response ends).
func (sw *sseWriter) reconnect(reason string) {
	b, _ := json.Marshal(map[string]string{"reason": reason})
	sw.buf.WriteString("event: reconnect\ndata: ")
	sw.buf.Write(b)
	sw.buf.WriteString("\n\n")
	sw.flush()
}

// data adds a data event holding items.
func (sw *sseWriter) data(items [][]byte) {
	var payload []byte
	switch {
	case sw.jsonMode:
		payload = encodeBody(true, items)
	case sw.base64:
		raw := bytes.Join(items, nil)
		payload = make([]byte, base64.StdEncoding.EncodedLen(len(raw)))
		base64.StdEncoding.Encode(payload, raw)
	default:
		payload = bytes.Join(items, nil)
	}
	sw.buf.WriteString("event: data\n")
	writeData(&sw.buf, payload)
}

// control adds a control event. A closed stream's last control event has
// no cursor: nothing more will come.
func (sw *sseWriter) control(next string, upToDate, closed bool) {
	c := control{StreamNextOffset: next}
	if closed {
		c.StreamClosed = true
	} else {
		c.StreamCursor = sw.h.cursor(sw.rq.cursor)
		c.UpToDate = upToDate
	}
	b, _ := json.Marshal(c)
	sw.buf.WriteString("event: control\n")
	writeData(&sw.buf, b)
}

// writeData writes payload as the data lines of an event, one per line of
// the payload: CR, LF and CRLF all end a line in SSE, so each becomes a
// line break and a payload can never end the event or start another. A
// line that starts with a space gets one more, which the client strips.
func writeData(buf *bytes.Buffer, payload []byte) {
	for {
		i := bytes.IndexAny(payload, "\r\n")
		line := payload
		if i >= 0 {
			line = payload[:i]
		}
		buf.WriteString("data:")
		if len(line) > 0 && line[0] == ' ' {
			buf.WriteByte(' ')
		}
		buf.Write(line)
		buf.WriteByte('\n')
		if i < 0 {
			break
		}
		if payload[i] == '\r' && i+1 < len(payload) && payload[i+1] == '\n' {
			i++
		}
		payload = payload[i+1:]
	}
	buf.WriteByte('\n')
}

// flush writes what is buffered, bounded by the write timeout. It returns
// false if the client is gone.
func (sw *sseWriter) flush() bool {
	if sw.buf.Len() == 0 {
		return true
	}
	_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.h.opts.WriteTimeout))
	_, err := sw.w.Write(sw.buf.Bytes())
	sw.buf.Reset()
	if err == nil {
		err = sw.rc.Flush()
	}
	return err == nil
}
