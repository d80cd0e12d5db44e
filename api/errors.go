package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	tether "github.com/tetherhq/tether"
)

// statusOf maps an error code to its HTTP status: the one place where codes
// become statuses.
func statusOf(code tether.Code) int {
	switch code {
	case tether.CodeBadRequest:
		return http.StatusBadRequest
	case tether.CodeUnauthorized, tether.CodeTokenExpired:
		return http.StatusUnauthorized
	case tether.CodeForbidden:
		return http.StatusForbidden
	case tether.CodeNotFound:
		return http.StatusNotFound
	case tether.CodeConflict, tether.CodeRunActive:
		return http.StatusConflict
	case tether.CodeLeaseLost, tether.CodeGone:
		return http.StatusGone
	case tether.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case tether.CodeRateLimited, tether.CodeQuotaExceeded:
		return http.StatusTooManyRequests
	case tether.CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

type errorBody struct {
	Error tether.ErrorInfo `json:"error"`
}

// writeError answers with an error. Errors that are not *tether.Error are
// internal: logged in full, answered with a generic message.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var te *tether.Error
	if !errors.As(err, &te) {
		switch {
		case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
			return // the client left
		case errors.Is(err, context.DeadlineExceeded):
			// The server gave up waiting (on the store, most likely):
			// what was asked may or may not have happened. Retrying is
			// safe for idempotent requests, which is what clients do on
			// a 503.
			te = tether.Wrap(err, tether.CodeUnavailable, "the request timed out; its outcome is unknown, retry it")
		default:
			te = tether.Wrap(err, tether.CodeInternal, "internal error")
		}
	}
	status := statusOf(te.Code)
	var sh shed
	if errors.As(err, &sh) {
		if ri := infoOf(r); ri != nil {
			ri.shed.Store(true)
		}
	} else if status >= 500 {
		s.log.LogAttrs(r.Context(), slog.LevelError, "request failed", slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.String("request_id", requestID(r)), slog.Any("err", err))
	}
	msg := te.Message
	if msg == "" {
		msg = string(te.Code)
	}
	writeJSON(w, status, errorBody{tether.ErrorInfo{Code: string(te.Code), Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// shed is a refusal the server makes by design to shed load (the budget
// of bodies in flight is full, shutdown has started): a 503 the client
// retries, not a failure of the server. writeError answers it as the
// error it wraps, but it is logged as a request, at info like a 429: a
// client that keeps the budget full must not fill the error log (it
// wrote two error lines per refused request).
type shed struct{ err *tether.Error }

func (e shed) Error() string { return e.err.Error() }
func (e shed) Unwrap() error { return e.err }

// errShuttingDown answers requests for streams that arrive after shutdown
// started: the client reconnects, to another node or after the restart.
var errShuttingDown = shed{tether.Errorf(tether.CodeUnavailable, "the server is shutting down")}

// errBodyTimeout is a request body that did not arrive within
// Limits.BodyTimeout.
var errBodyTimeout = tether.Errorf(tether.CodeBadRequest, "the request body did not arrive in time")
