package streams

import (
	"errors"
	"fmt"
)

// A Code classifies a refused request; the HTTP layer maps each to a
// status.
type Code int

// The codes of refused requests.
const (
	// CodeBadRequest: malformed headers or body, an offset that is not a
	// position of the stream, an empty append.
	CodeBadRequest Code = iota + 1
	// CodeNotFound: the stream does not exist (or expired).
	CodeNotFound
	// CodeGone: the stream was deleted while forks still read it; its path
	// cannot be used until they are gone. Also an offset before what the
	// stream retains.
	CodeGone
	// CodeConflict: the stream exists with another configuration, is closed,
	// the content type does not match, Stream-Seq regressed, or an
	// idempotent producer left a gap.
	CodeConflict
	// CodeForbidden: a producer's epoch is stale (it was fenced).
	CodeForbidden
	// CodeReadOnly: the path is a thread log, which only the runs engine
	// writes.
	CodeReadOnly
	// CodeTooLarge: an append is over the size limit.
	CodeTooLarge
	// CodeUnavailable: the store failed or is closing; the request may be
	// retried.
	CodeUnavailable
)

// Error is a refused request, with what the answer's Durable Streams
// headers need.
type Error struct {
	Code    Code
	Message string
	// Closed says the stream is closed (Stream-Closed: true), and Tail is
	// its tail (Stream-Next-Offset), for refusals that concern a closed
	// stream.
	Closed bool
	Tail   string
	// Producer is set for refusals of an idempotent producer: the current
	// epoch (stale epoch) or the expected and received sequence numbers (a
	// gap).
	Producer *ProducerRefusal

	cause error
}

// ProducerRefusal details a refused producer append.
type ProducerRefusal struct {
	Epoch                    int64
	ExpectedSeq, ReceivedSeq int64
}

func (e *Error) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("streams: %s: %v", e.Message, e.cause)
	}
	return "streams: " + e.Message
}

// Unwrap returns the cause, if any (for logs).
func (e *Error) Unwrap() error { return e.cause }

// Is matches the sentinels below by code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Code == e.Code
}

// Sentinels for errors.Is; each matches every *Error with its code.
var (
	ErrBadRequest  = &Error{Code: CodeBadRequest}
	ErrNotFound    = &Error{Code: CodeNotFound}
	ErrGone        = &Error{Code: CodeGone}
	ErrConflict    = &Error{Code: CodeConflict}
	ErrForbidden   = &Error{Code: CodeForbidden}
	ErrReadOnly    = &Error{Code: CodeReadOnly}
	ErrTooLarge    = &Error{Code: CodeTooLarge}
	ErrUnavailable = &Error{Code: CodeUnavailable}
)

func errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of err, or 0 if it is not an *Error.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}
