package tether

import (
	"errors"
	"fmt"
	"time"
)

// A Code is a stable, machine-readable error code. Codes are part of the
// wire contract: clients branch on them, so they never change meaning.
type Code string

// The error codes of the wire contract.
const (
	CodeBadRequest   Code = "bad_request"  // the request is malformed or breaks a rule
	CodeUnauthorized Code = "unauthorized" // no valid token
	CodeForbidden    Code = "forbidden"    // the token's role may not do this
	CodeNotFound     Code = "not_found"    // the thread, run or message does not exist
	CodeConflict     Code = "conflict"     // the request conflicts with the current state
	CodeRunActive    Code = "run_active"   // the thread has an active run (multitask reject)
	CodeLeaseLost    Code = "lease_lost"   // the worker's lease expired or was taken over
	CodeGone         Code = "gone"         // the resource existed and was removed
	CodeTooLarge     Code = "too_large"    // a size limit was exceeded
	CodeRateLimited  Code = "rate_limited" // too many requests: retry after Retry-After
	// CodeQuotaExceeded: a fixed quota (not a rate) is used up; waiting
	// alone does not help.
	CodeQuotaExceeded Code = "quota_exceeded"
	CodeUnavailable   Code = "unavailable" // the server is shutting down or not ready
	CodeInternal      Code = "internal"    // a fault on the server; details are in its log
)

// CodeTokenExpired is the 401 of a signed token (JWT) whose exp is past:
// the client fetches a fresh token rather than ask its user to sign in.
const CodeTokenExpired Code = "token_expired"

// Error is an error that can be shown to a client: a stable code and a
// message free of internal detail. The cause, if any, is kept for logs and
// errors.Is/As but is never sent to clients.
type Error struct {
	Code    Code
	Message string
	// Status is the HTTP status of the answer the error was read from,
	// set by the Go client (package client); 0 for an error made without
	// an answer, and on the server, where the code alone sets the status.
	Status int
	// RetryAfter is the answer's Retry-After (a 429 or a 503 says how
	// long to wait before sending again), set by the Go client; 0 when
	// the answer had none, or one that is not a number of seconds.
	RetryAfter time.Duration
	cause      error
}

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error with the given code and message that keeps err as
// its cause (for logs; it is never shown to clients).
func Wrap(err error, code Code, message string) *Error {
	return &Error{Code: code, Message: message, cause: err}
}

func (e *Error) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.cause)
	}
	return string(e.Code) + ": " + e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.cause }

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, tether.ErrNotFound) matches any not_found error.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Message == ""
}

// Sentinels for errors.Is. Each matches every *Error with its code.
var (
	ErrBadRequest   = &Error{Code: CodeBadRequest}
	ErrUnauthorized = &Error{Code: CodeUnauthorized}
	ErrTokenExpired = &Error{Code: CodeTokenExpired}
	ErrForbidden    = &Error{Code: CodeForbidden}
	ErrNotFound     = &Error{Code: CodeNotFound}
	ErrConflict     = &Error{Code: CodeConflict}
	ErrRunActive    = &Error{Code: CodeRunActive}
	ErrLeaseLost    = &Error{Code: CodeLeaseLost}
	ErrGone         = &Error{Code: CodeGone}
	ErrTooLarge     = &Error{Code: CodeTooLarge}
	ErrRateLimited  = &Error{Code: CodeRateLimited}
	ErrUnavailable  = &Error{Code: CodeUnavailable}
)

// CodeOf returns the code of err: the code of the first *Error in its chain,
// or CodeInternal.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorInfo is the wire form of an error: in a run's error, in run.finished,
// and in every error response body.
type ErrorInfo struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}
