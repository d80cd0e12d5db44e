package agents

import (
	"context"
	"encoding/json"

	tether "github.com/tetherhq/tether"
)

// Agent answers runs.
type Agent interface {
	// Run produces the events of one run through s. Returning nil ends
	// the run done unless the agent finished it itself; returning an error
	// ends it error (the error is logged, and clients see a generic
	// message). ctx is cancelled when a client cancels the run or the
	// server ends it; the run then ends cancelled.
	Run(ctx context.Context, s *Session) error
}

// Func adapts a function to the Agent interface.
type Func func(ctx context.Context, s *Session) error

// Run calls f.
func (f Func) Run(ctx context.Context, s *Session) error { return f(ctx, s) }

// Transport carries a session's events to the server.
type Transport interface {
	// Append appends events to the run atomically. It reports whether a
	// cancel was requested. An error that wraps ErrNotSent says that the
	// events certainly are not in the log: they were never sent (ctx had
	// ended).
	Append(ctx context.Context, events []*tether.Event) (cancelRequested bool, err error)
	// WaitInput waits for the answer to an open request (run.input).
	WaitInput(ctx context.Context, requestID string) (json.RawMessage, error)
}
