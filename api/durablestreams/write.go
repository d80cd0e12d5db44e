package durablestreams

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tetherhq/tether/streams"
)

var (
	// decimal is a non-negative integer without sign or leading zeros.
	decimal = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)
	// digits is a non-negative integer, leading zeros allowed (producer
	// numbers, as the reference clients send them).
	digits = regexp.MustCompile(`^[0-9]+$`)
)

// create serves PUT: create (or confirm) a stream, or fork one.
func (h *Handler) create(w http.ResponseWriter, r *http.Request, path string) {
	hd := r.Header
	req := streams.CreateRequest{Path: path, ContentType: strings.TrimSpace(hd.Get("Content-Type")),
		Closed: hd.Get("Stream-Closed") == "true", ForkedFrom: hd.Get("Stream-Forked-From"), ForkOffset: hd.Get("Stream-Fork-Offset")}
	ttl, hasTTL := header(hd, "Stream-TTL")
	exp, hasExp := header(hd, "Stream-Expires-At")
	if hasTTL && hasExp {
		h.fail(w, r, errorf(http.StatusBadRequest, "bad_request", "Stream-TTL and Stream-Expires-At are exclusive"))
		return
	}
	if hasTTL {
		n, err := strconv.ParseInt(ttl, 10, 64)
		if !decimal.MatchString(ttl) || err != nil {
			h.fail(w, r, errorf(http.StatusBadRequest, "bad_request", "Stream-TTL must be a whole number of seconds"))
			return
		}
		req.TTL = &n
	}
	if hasExp {
		t, err := time.Parse(time.RFC3339Nano, exp)
		if err != nil {
			h.fail(w, r, errorf(http.StatusBadRequest, "bad_request", "Stream-Expires-At must be an RFC 3339 time"))
			return
		}
		t = t.UTC()
		req.ExpiresAt = &t
	}
	if sub, ok := header(hd, "Stream-Fork-Sub-Offset"); ok {
		n, err := strconv.ParseInt(sub, 10, 64)
		if req.ForkedFrom == "" || !decimal.MatchString(sub) || err != nil {
			h.fail(w, r, errorf(http.StatusBadRequest, "bad_request", "Stream-Fork-Sub-Offset must be a whole number, with Stream-Forked-From"))
			return
		}
		req.ForkSubOffset = n
	}
	if req.ForkOffset != "" && req.ForkedFrom == "" {
		h.fail(w, r, errorf(http.StatusBadRequest, "bad_request", "Stream-Fork-Offset needs Stream-Forked-From"))
		return
	}
	body, err := h.body(w, r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	req.Body = body
	res, err := h.svc.Create(r.Context(), req)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := w.Header()
	setContentType(out, res.Info.ContentType)
	out.Set("Stream-Next-Offset", res.Info.Tail)
	if res.Info.Closed {
		out.Set("Stream-Closed", "true")
	}
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
		out.Set("Location", h.location(path))
	}
	w.WriteHeader(status)
}

// append serves POST: append, close, or both.
func (h *Handler) append(w http.ResponseWriter, r *http.Request, path string) {
	hd := r.Header
	req := streams.AppendRequest{Path: path, ContentType: strings.TrimSpace(hd.Get("Content-Type")),
		Close: hd.Get("Stream-Closed") == "true", Seq: hd.Get("Stream-Seq")}
	p, err := producerOf(hd)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	req.Producer = p
	if req.Body, err = h.body(w, r); err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := h.svc.Append(r.Context(), req)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := w.Header()
	out.Set("Stream-Next-Offset", res.Tail)
	if res.Closed {
		out.Set("Stream-Closed", "true")
	}
	status := http.StatusNoContent
	if res.Producer != nil {
		out.Set("Producer-Epoch", strconv.FormatInt(res.Producer.Epoch, 10))
		out.Set("Producer-Seq", strconv.FormatInt(res.Producer.Seq, 10))
		if !res.Duplicate && len(req.Body) > 0 {
			status = http.StatusOK // new data from a producer (PROTOCOL.md §5.2.1)
		}
	}
	w.WriteHeader(status)
}

// producerOf reads the producer headers: all three or none.
func producerOf(hd http.Header) (*streams.Producer, error) {
	id, hasID := header(hd, "Producer-Id")
	epoch, hasEpoch := header(hd, "Producer-Epoch")
	seq, hasSeq := header(hd, "Producer-Seq")
	if !hasID && !hasEpoch && !hasSeq {
		return nil, nil
	}
	if !hasID || !hasEpoch || !hasSeq {
		return nil, errorf(http.StatusBadRequest, "bad_request", "Producer-Id, Producer-Epoch and Producer-Seq go together")
	}
	p := &streams.Producer{ID: id}
	var err1, err2 error
	p.Epoch, err1 = strconv.ParseInt(epoch, 10, 64)
	p.Seq, err2 = strconv.ParseInt(seq, 10, 64)
	if !digits.MatchString(epoch) || !digits.MatchString(seq) || err1 != nil || err2 != nil ||
		p.Epoch > streams.MaxProducerNumber || p.Seq > streams.MaxProducerNumber {
		return nil, errorf(http.StatusBadRequest, "bad_request", "Producer-Epoch and Producer-Seq must be integers from 0 to 2^53-1")
	}
	if id == "" {
		return nil, errorf(http.StatusBadRequest, "bad_request", "Producer-Id must not be empty")
	}
	return p, nil
}

// head serves HEAD: the stream's metadata, without extending its TTL.
func (h *Handler) head(w http.ResponseWriter, r *http.Request, path string) {
	in, err := h.svc.Head(r.Context(), path)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := w.Header()
	setContentType(out, in.ContentType)
	out.Set("Stream-Next-Offset", in.Tail)
	out.Set("Cache-Control", "no-store")
	if in.Closed {
		out.Set("Stream-Closed", "true")
	}
	if in.TTL != nil {
		out.Set("Stream-TTL", strconv.FormatInt(*in.TTL, 10))
	}
	if in.ExpiresAt != nil {
		out.Set("Stream-Expires-At", in.ExpiresAt.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	}
	w.WriteHeader(http.StatusOK)
}

// delete serves DELETE.
func (h *Handler) delete(w http.ResponseWriter, r *http.Request, path string) {
	if err := h.svc.Delete(r.Context(), path); err != nil {
		h.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// body reads a request body up to the limit. An over-long body is read to
// its end (up to four times the limit) before the 413, so that a client
// still sending it gets the answer rather than a reset connection.
func (h *Handler) body(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := h.opts.MaxBodyBytes
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "bad_request", "the body could not be read")
	}
	if int64(len(b)) > limit {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 4*limit))
		return nil, &http.MaxBytesError{Limit: limit}
	}
	return b, nil
}

// header returns a header's value and whether it was sent at all (an
// empty value counts).
func header(hd http.Header, name string) (string, bool) {
	v, ok := hd[http.CanonicalHeaderKey(name)]
	if !ok || len(v) == 0 {
		return "", false
	}
	return strings.TrimSpace(v[0]), true
}

// location returns the URL of the stream at path: absolute from
// Options.BaseURL, else the path alone (relative, which HTTP allows). Never
// from the request's Host header, which the requester chooses.
func (h *Handler) location(path string) string {
	u := url.URL{Path: Prefix + path}
	return strings.TrimSuffix(h.opts.BaseURL, "/") + u.EscapedPath()
}
