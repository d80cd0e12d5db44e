package openai

import (
	"fmt"
	"net/http"
	"time"

	tether "github.com/tetherhq/tether"
)

// Codes of the errors a run of this agent can end with (the code of
// run.finished's error). Their messages are written for people and never
// quote the provider.
const (
	// CodeBadOptions: the run's metadata.openai is invalid, or no model is
	// set for the run. Nothing was sent to the provider.
	CodeBadOptions = "bad_options"
	// CodeUpstreamRateLimited: the provider answered HTTP 429, also on
	// every retry.
	CodeUpstreamRateLimited = "upstream_rate_limited"
	// CodeUpstreamError: the provider answered another non-2xx status,
	// could not be reached, reported an error in the stream, or sent
	// something that is not a chat completion stream.
	CodeUpstreamError = "upstream_error"
	// CodeUpstreamDisconnected: the stream ended before the provider said
	// the answer was complete, or the provider sent nothing for
	// Options.IdleTimeout. What was streamed stays in the message, which
	// ends error.
	CodeUpstreamDisconnected = "upstream_disconnected"
)

// failure is why the provider gave no complete answer: what the run's
// error says, whether another attempt may help, and for the log what
// happened. Nothing of it but info reaches clients.
type failure struct {
	info   tether.ErrorInfo
	retry  bool          // a retry may help (if nothing was streamed yet)
	wait   time.Duration // the provider's Retry-After, if any
	status int           // the HTTP status, if the provider answered one
	kind   string        // the provider's error type or code, for the log
	cause  error         // for the log
}

func (f *failure) Error() string {
	if f.cause != nil {
		return fmt.Sprintf("%s: %v", f.info.Code, f.cause)
	}
	return f.info.Code + ": " + f.info.Message
}

func (f *failure) Unwrap() error { return f.cause }

// statusFailure is the failure for a non-2xx answer. Only 408, 429 and 5xx
// are retried: the others (401, 400, 404…) fail the same way every time.
func statusFailure(status int, wait time.Duration) *failure {
	f := &failure{
		info:   tether.ErrorInfo{Code: CodeUpstreamError, Message: fmt.Sprintf("The model provider answered HTTP %d.", status)},
		status: status,
		wait:   wait,
		retry:  status == http.StatusTooManyRequests || status == http.StatusRequestTimeout || status >= 500,
	}
	if status == http.StatusTooManyRequests {
		f.info.Code = CodeUpstreamRateLimited
	}
	return f
}

func unreachable(cause error) *failure {
	return &failure{
		info:  tether.ErrorInfo{Code: CodeUpstreamError, Message: "The model provider could not be reached."},
		retry: true,
		cause: cause,
	}
}

func disconnected(cause error) *failure {
	return &failure{
		info:  tether.ErrorInfo{Code: CodeUpstreamDisconnected, Message: "The connection to the model provider dropped before the answer was complete."},
		retry: true,
		cause: cause,
	}
}

// silent is the failure of a provider that sent nothing for d. It is not
// retried: a provider stuck that long is not worth another such wait.
func silent(d time.Duration) *failure {
	return &failure{
		info:  tether.ErrorInfo{Code: CodeUpstreamDisconnected, Message: fmt.Sprintf("The model provider sent nothing for %s; the request was abandoned.", d)},
		cause: fmt.Errorf("no data for %s", d),
	}
}

func malformed(cause error) *failure {
	return &failure{
		info:  tether.ErrorInfo{Code: CodeUpstreamError, Message: "The model provider sent an answer that could not be read."},
		cause: cause,
	}
}

func streamError(cause error) *failure {
	return &failure{
		info:  tether.ErrorInfo{Code: CodeUpstreamError, Message: "The model provider reported an error while answering."},
		retry: true,
		cause: cause,
	}
}

func notStreamed(contentType string) *failure {
	return &failure{
		info:  tether.ErrorInfo{Code: CodeUpstreamError, Message: "The model provider did not stream its answer."},
		cause: fmt.Errorf("response content type %q", contentType),
	}
}
