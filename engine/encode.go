package engine

import (
	"fmt"

	tether "github.com/tetherhq/tether"
)

// eventSizeError is why an event is refused for its size: its encoding is
// size bytes, over the largest event (limit). Each caller says what the
// event is to its client (prepare: "event 2 (text.delta)"; SubmitInput:
// the answer).
type eventSizeError struct{ size, limit int }

func (e *eventSizeError) Error() string {
	return fmt.Sprintf("%d bytes; the limit is %d", e.size, e.limit)
}

// encodeEvent returns ev's encoding (Event.Encode), the form committed;
// or *eventSizeError when it is larger than the largest event, or the
// encoding's error.
func (e *Engine) encodeEvent(ev *tether.Event) ([]byte, error) {
	b, err := ev.Encode()
	if err != nil {
		return nil, err
	}
	if len(b) > e.opts.MaxEventBytes {
		return nil, &eventSizeError{size: len(b), limit: e.opts.MaxEventBytes}
	}
	return b, nil
}
