package durablestreams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/tetherhq/tether/streams"
)

// httpError is an answer that is not a success.
type httpError struct {
	status  int
	code    string
	message string
}

func (e *httpError) Error() string { return e.code + ": " + e.message }

func errorf(status int, code, format string, args ...any) *httpError {
	return &httpError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

// statusOf maps a streams error code to its HTTP status and wire code.
func statusOf(c streams.Code) (int, string) {
	switch c {
	case streams.CodeBadRequest:
		return http.StatusBadRequest, "bad_request"
	case streams.CodeNotFound:
		return http.StatusNotFound, "not_found"
	case streams.CodeGone:
		return http.StatusGone, "gone"
	case streams.CodeConflict:
		return http.StatusConflict, "conflict"
	case streams.CodeForbidden:
		return http.StatusForbidden, "forbidden"
	case streams.CodeReadOnly:
		return http.StatusMethodNotAllowed, "method_not_allowed"
	case streams.CodeTooLarge:
		return http.StatusRequestEntityTooLarge, "too_large"
	case streams.CodeUnavailable:
		return http.StatusServiceUnavailable, "unavailable"
	}
	return http.StatusInternalServerError, "internal"
}

// fail answers with an error, logging faults of the server.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	if status := writeError(w, r, err); status >= 500 {
		h.log.Error("durable streams request failed", "method", r.Method, "path", r.URL.Path,
			"request_id", w.Header().Get("X-Request-Id"), "err", err)
	}
}

// cutShort logs why an SSE response already under way ended early, when
// the cause is the server's (a failed read of the log), not the stream's
// deletion or the client leaving: the response itself can only end, and
// the client's next request gets the error.
func (h *Handler) cutShort(w http.ResponseWriter, r *http.Request, err error) {
	var se *streams.Error
	if r.Context().Err() != nil || errors.Is(err, context.Canceled) {
		return
	}
	if errors.As(err, &se) {
		if status, _ := statusOf(se.Code); status < 500 {
			return
		}
	}
	h.log.Warn("durable streams SSE read ended early", "path", r.URL.Path,
		"request_id", w.Header().Get("X-Request-Id"), "err", err)
}

// writeError answers with an error, in Tether's error body, with the
// protocol's headers for a closed stream or a refused producer. It returns
// the status.
func writeError(w http.ResponseWriter, r *http.Request, err error) int {
	var (
		status    int
		code, msg string
		he        *httpError
		se        *streams.Error
		mbe       *http.MaxBytesError
		hd        = w.Header()
	)
	switch {
	case errors.As(err, &he):
		status, code, msg = he.status, he.code, he.message
	case errors.As(err, &se):
		status, code = statusOf(se.Code)
		msg = se.Message
		if se.Closed {
			hd.Set("Stream-Closed", "true")
		}
		if se.Tail != "" {
			hd.Set("Stream-Next-Offset", se.Tail)
		}
		if p := se.Producer; p != nil {
			if se.Code == streams.CodeForbidden {
				hd.Set("Producer-Epoch", strconv.FormatInt(p.Epoch, 10))
			} else {
				hd.Set("Producer-Expected-Seq", strconv.FormatInt(p.ExpectedSeq, 10))
				hd.Set("Producer-Received-Seq", strconv.FormatInt(p.ReceivedSeq, 10))
			}
		}
		if se.Code == streams.CodeReadOnly {
			hd.Set("Allow", "GET, HEAD, OPTIONS")
		}
	case errors.As(err, &mbe):
		status, code, msg = http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body is over %d bytes", mbe.Limit)
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		return 0 // the client left
	default:
		status, code, msg = http.StatusInternalServerError, "internal", "internal error"
	}
	if status >= 500 {
		// The cause reaches the server's log through the request log; the
		// client sees no detail.
		msg = "the server could not do this; retry"
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	hd.Set("Content-Type", "application/json")
	hd.Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(body)
	return status
}
