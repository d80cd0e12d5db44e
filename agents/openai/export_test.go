package openai

import (
	"context"
	"io"
	"strings"
	"time"

	tether "github.com/tetherhq/tether"
)

// SetRetry sets the agent's retry pauses (base and cap) and how it pauses.
func SetRetry(a *Agent, base, limit time.Duration, sleep func(context.Context, time.Duration) error) {
	a.retryBase, a.retryCap, a.sleep = base, limit, sleep
}

// URL returns the URL the agent posts to.
func URL(a *Agent) string { return a.url }

// NewSSE returns the next function of an SSE reader over r.
func NewSSE(r io.Reader) func() ([]byte, error) { return newSSEReader(r).next }

var (
	RetryAfter = retryAfter
	ParseChunk = parseChunk
	ErrTooLong = errLineTooLong
	MaxLine    = maxLine
)

// Answer turns an SSE body into the events of the answer the way a run
// does (without batching): up to [DONE] or the end, then the events that
// complete the answer, or that end its message error after a failure.
func Answer(body, msgID string) []*tether.Event {
	ans := newAnswer(func() string { return msgID })
	next := newSSEReader(strings.NewReader(body)).next
	var out []*tether.Event
	for {
		data, err := next()
		if err == nil && string(data) == "[DONE]" {
			break
		}
		var c *chunk
		if err == nil {
			c, err = parseChunk(data)
		}
		if err == nil {
			out, err = ans.add(c, out)
		}
		if err != nil {
			if ans.started() {
				out = append(out, &tether.Event{Type: tether.EventMessageFinished, MessageID: msgID, Status: string(tether.MessageError)})
			}
			return out
		}
	}
	return ans.end(out)
}
