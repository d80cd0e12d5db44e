package durablestreams

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tetherhq/tether/streams"
)

// readQuery is what a GET asks for.
type readQuery struct {
	offset    string // "" when absent
	hasOffset bool
	live      string // "", "long-poll" or "sse"
	cursor    string
}

func parseQuery(r *http.Request) (readQuery, error) {
	q := r.URL.Query()
	var rq readQuery
	if vs, ok := q["offset"]; ok {
		if len(vs) != 1 {
			return rq, errorf(http.StatusBadRequest, "bad_request", "offset must be given once")
		}
		if vs[0] == "" {
			return rq, errorf(http.StatusBadRequest, "bad_request", "offset must not be empty")
		}
		rq.offset, rq.hasOffset = vs[0], true
	}
	rq.live = q.Get("live")
	switch rq.live {
	case "", "long-poll", "sse":
	default:
		return rq, errorf(http.StatusBadRequest, "bad_request", "live must be long-poll or sse")
	}
	if rq.live != "" && !rq.hasOffset {
		return rq, errorf(http.StatusBadRequest, "bad_request", "live reads need an offset")
	}
	rq.cursor = q.Get("cursor")
	return rq, nil
}

// read serves GET: a catch-up read, a long poll or SSE.
func (h *Handler) read(w http.ResponseWriter, r *http.Request, path string) {
	rq, err := parseQuery(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	switch rq.live {
	case "sse":
		h.sse(w, r, path, rq)
		return
	case "long-poll":
		h.longPoll(w, r, path, rq)
		return
	}
	h.catchUp(w, r, path, rq)
}

// catchUp answers a catch-up read: everything from the offset to the tail
// in one answer (up to streams.Options.CatchUpBytes, past which it ends at
// a whole append short of the tail, without Stream-Up-To-Date, and the
// client reads on from Stream-Next-Offset). Durable Streams clients read a
// catch-up (live: false) as one answer and stop, so an answer short of the
// tail would hand them a prefix. The end is decided before the headers
// are written, then the data is written a page at a time as it is read
// from the store; Content-Length is exact, so an answer cut short by a
// failure mid-way (the stream deleted meanwhile) is seen by the client as
// cut, never taken for the whole.
func (h *Handler) catchUp(w http.ResponseWriter, r *http.Request, path string, rq readQuery) {
	ctx := r.Context()
	cu, err := h.svc.CatchUp(ctx, path, rq.offset)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if !h.readHeaders(w, r, path, rq, readState{info: &cu.Info, next: cu.Next, upToDate: cu.UpToDate, closed: cu.Closed}, "") {
		return
	}
	n := cu.Bytes
	if cu.JSON {
		n += 2 + int64(max(cu.Chunks-1, 0)) // [ , ]
	}
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var buf []byte
	first := true
	if cu.JSON {
		buf = append(buf, '[')
	}
	err = cu.Each(ctx, func(chunks [][]byte) error {
		for _, c := range chunks {
			if cu.JSON && !first {
				buf = append(buf, ',')
			}
			first = false
			buf = append(buf, c...)
		}
		err := h.write(w, rc, buf)
		buf = buf[:0]
		return err
	})
	if err == nil {
		if cu.JSON {
			buf = append(buf, ']')
		}
		err = h.write(w, rc, buf)
	}
	if err != nil && ctx.Err() == nil {
		// The headers are out: all that is left is to end the answer
		// short (Content-Length tells the client).
		h.log.Warn("durable streams catch-up read cut short", "path", r.URL.Path,
			"request_id", w.Header().Get("X-Request-Id"), "err", err)
	}
}

// write writes b, bounded by the write timeout: a client that does not
// read is cut.
func (h *Handler) write(w http.ResponseWriter, rc *http.ResponseController, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	_ = rc.SetWriteDeadline(time.Now().Add(h.opts.WriteTimeout))
	_, err := w.Write(b)
	return err
}

// readState is what the headers of a read with data say.
type readState struct {
	info     *streams.Info
	next     string
	upToDate bool
	closed   bool
}

// readHeaders sets the headers of a read with data (a catch-up read, or a
// long poll that got data). It answers 304 and returns false if the
// client's If-None-Match matches.
func (h *Handler) readHeaders(w http.ResponseWriter, r *http.Request, path string, rq readQuery, st readState, cursor string) bool {
	out := w.Header()
	setContentType(out, st.info.ContentType)
	out.Set("Stream-Next-Offset", st.next)
	if st.upToDate {
		out.Set("Stream-Up-To-Date", "true")
	}
	if st.closed {
		out.Set("Stream-Closed", "true")
	}
	if cursor != "" {
		out.Set("Stream-Cursor", cursor)
	}
	switch {
	case rq.offset == streams.OffsetNow:
		// The tail moves with every append: never cache it.
		out.Set("Cache-Control", "no-store")
	case st.upToDate:
		// More may come: caches must check again (the ETag makes that
		// cheap).
		out.Set("Cache-Control", "no-cache")
	default:
		// A read that stops before the tail always returns the same
		// bytes. Streams may hold private data: shared caches keep out.
		out.Set("Cache-Control", "private, max-age=60, stale-while-revalidate=300")
	}
	if rq.offset != streams.OffsetNow {
		etag := etagOf(path, st, rq.offset)
		out.Set("ETag", etag)
		if match(r.Header.Get("If-None-Match"), etag) {
			w.WriteHeader(http.StatusNotModified)
			return false
		}
	}
	return true
}

// writeRead answers a long poll that got data.
func (h *Handler) writeRead(w http.ResponseWriter, r *http.Request, path string, rq readQuery, res *streams.ReadResult, cursor string) {
	if !h.readHeaders(w, r, path, rq, readState{info: &res.Info, next: res.Next, upToDate: res.UpToDate, closed: res.Closed}, cursor) {
		return
	}
	body := encodeBody(res.JSON, res.Items)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// encodeBody is a read's body: a JSON array of the messages, or the bytes.
func encodeBody(jsonMode bool, items [][]byte) []byte {
	if !jsonMode {
		return bytes.Join(items, nil)
	}
	n := 2
	for _, it := range items {
		n += len(it) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}

// etagOf names what a read returned: the stream (its path and when it was
// created, so a stream created again never shares a tag with the old),
// where the read started and ended, and whether it saw the close.
func etagOf(path string, st readState, offset string) string {
	if offset == "" {
		offset = streams.OffsetStart
	}
	var b strings.Builder
	b.WriteByte('"')
	b.WriteString(base64.RawURLEncoding.EncodeToString([]byte(path)))
	b.WriteByte(':')
	b.WriteString(base64.RawURLEncoding.EncodeToString([]byte(st.info.Created.UTC().Format("20060102150405.000000000"))))
	b.WriteByte(':')
	b.WriteString(offset)
	b.WriteByte(':')
	b.WriteString(st.next)
	if st.closed {
		b.WriteString(":c")
	}
	b.WriteByte('"')
	return b.String()
}

// match reports whether an If-None-Match header matches etag.
func match(header, etag string) bool {
	if header == "" {
		return false
	}
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}

// longPoll serves a long poll: data at once if there is some after the
// offset, else the first data appended within the long-poll timeout, else
// 204.
func (h *Handler) longPoll(w http.ResponseWriter, r *http.Request, path string, rq readQuery) {
	done, ok := h.opts.Live(w, r)
	if !ok {
		return
	}
	defer done()
	after := streams.OffsetNow
	if rq.offset != streams.OffsetNow {
		res, err := h.svc.Read(r.Context(), path, rq.offset)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		if len(res.Items) > 0 || !res.UpToDate || res.Closed {
			if len(res.Items) == 0 && res.Closed {
				h.noContent(w, rq, res.Next, true)
				return
			}
			h.writeRead(w, r, path, rq, res, h.cursor(rq.cursor))
			return
		}
		after = res.Next
	}
	f, err := h.svc.Follow(r.Context(), path, after)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	defer f.Close()
	in, err := h.svc.Head(r.Context(), path)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	tail := in.Tail
	if after != streams.OffsetNow {
		tail = after
	}
	if in.Closed && after == streams.OffsetNow {
		h.noContent(w, rq, tail, true)
		return
	}
	wait, _ := h.untilExpiry(r, h.opts.LongPollTimeout)
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	stop := context.AfterFunc(h.opts.Stopping, cancel)
	defer stop()
	for {
		b, err := f.Next(ctx)
		if err != nil {
			if ctx.Err() != nil && r.Context().Err() == nil {
				h.noContent(w, rq, tail, false)
				return
			}
			h.fail(w, r, err)
			return
		}
		if len(b.Items) == 0 {
			if b.Closed {
				h.noContent(w, rq, b.Next, true)
				return
			}
			tail = b.Next
			continue
		}
		res := &streams.ReadResult{Info: *in, JSON: streams.IsJSON(in.ContentType) || in.ReadOnly, Items: b.Items,
			Next: b.Next, UpToDate: !b.More, Closed: b.Closed}
		h.writeRead(w, r, path, rq, res, h.cursor(rq.cursor))
		return
	}
}

// noContent answers a long poll that got no data.
func (h *Handler) noContent(w http.ResponseWriter, rq readQuery, next string, closed bool) {
	out := w.Header()
	out.Set("Stream-Next-Offset", next)
	out.Set("Stream-Up-To-Date", "true")
	if closed {
		out.Set("Stream-Closed", "true")
	} else {
		out.Set("Stream-Cursor", h.cursor(rq.cursor))
	}
	out.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}
