package client

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	tether "github.com/tetherhq/tether"
)

// CodeTokenUnavailable is the client's code, never the server's, for a
// request that was not sent because Options.TokenFunc failed. The error
// wraps the function's. The TypeScript and Python clients use the same
// code.
const CodeTokenUnavailable tether.Code = "token_unavailable"

// CodeProtocol is the client's code, never the server's, for an answer
// that is not what the protocol says: a 2xx whose body is not the JSON
// expected (a proxy's page, an empty body, JSON of another shape), an
// error answer of a 4xx status that has no code of its own (405, 418,
// 422) and no error body, a stream that is not an event stream, an event
// that is not JSON. Repeating the request would most likely get the same.
// The TypeScript and Python clients use the same code (docs/protocol.md
// §1).
const CodeProtocol tether.Code = "protocol"

// responseError turns a non-2xx answer into a *tether.Error with the
// server's code and message, and the answer's status and Retry-After (for
// a caller that gives up after the client's retries and says how long to
// wait). An answer that is not the protocol's error body (a proxy's page,
// say) gives the code its status means (codeForStatus) and the status
// only: raw bodies never reach error messages, where they could leak into
// logs or UIs.
func responseError(resp *http.Response) *tether.Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if e := errorInfo(body); e != nil {
		return &tether.Error{Code: tether.Code(e.Code), Message: e.Message, Status: resp.StatusCode, RetryAfter: retryAfter(resp)}
	}
	return &tether.Error{
		Code:       codeForStatus(resp.StatusCode),
		Message:    fmt.Sprintf("server answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode)),
		Status:     resp.StatusCode,
		RetryAfter: retryAfter(resp),
	}
}

// codeForStatus is the code of an error answer whose body is not the
// protocol's (a proxy's page): the one the server gives with that status;
// internal for another 5xx (a fault on the way, retried where safe), and
// protocol for another status (405, 418, 422: no answer of this protocol,
// so a repeat would get the same). The TypeScript and Python clients read
// it the same way (docs/protocol.md §1).
func codeForStatus(status int) tether.Code {
	switch status {
	case http.StatusBadRequest:
		return tether.CodeBadRequest
	case http.StatusUnauthorized:
		return tether.CodeUnauthorized
	case http.StatusForbidden:
		return tether.CodeForbidden
	case http.StatusNotFound:
		return tether.CodeNotFound
	case http.StatusConflict:
		return tether.CodeConflict
	case http.StatusGone:
		return tether.CodeGone
	case http.StatusRequestEntityTooLarge:
		return tether.CodeTooLarge
	case http.StatusTooManyRequests:
		return tether.CodeRateLimited
	case http.StatusServiceUnavailable:
		return tether.CodeUnavailable
	}
	if status >= 500 {
		return tether.CodeInternal
	}
	return CodeProtocol
}

// badAnswer is the error of a 2xx answer whose body is not the JSON the
// call expects: a proxy's page, an empty body. It has code protocol and a
// message without the body; the decoder's error is kept as the cause, for
// logs.
func badAnswer(op string, resp *http.Response, err error) *tether.Error {
	return tether.Wrap(err, CodeProtocol,
		fmt.Sprintf("%s: server answered %d %s with a body that is not the expected JSON", op, resp.StatusCode, http.StatusText(resp.StatusCode)))
}

// errorCode returns the code of an error body, or "".
func errorCode(body []byte) tether.Code {
	if e := errorInfo(body); e != nil {
		return tether.Code(e.Code)
	}
	return ""
}

// errorInfo returns the error of a body of the protocol's error shape
// (with a code), or nil.
func errorInfo(body []byte) *tether.ErrorInfo {
	var e struct {
		Error *tether.ErrorInfo `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != nil && e.Error.Code != "" {
		return e.Error
	}
	return nil
}
