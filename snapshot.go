package tether

import "encoding/json"

// Snapshot is the state of a thread as of Offset: every event up to and
// including Offset is folded in, and none after it. It is what
// GET /v1/threads/{id} returns and what a subscription sends first.
type Snapshot struct {
	Thread   Thread    `json:"thread"`
	Runs     []Run     `json:"runs"`
	Messages []Message `json:"messages"`
	Offset   Offset    `json:"offset"`
	// State is the thread's state (state.snapshot and state.delta events),
	// absent while it is null: never set, or set to null.
	State json.RawMessage `json:"state,omitempty"`
	// Reset is true when the snapshot replaces a client's state because its
	// cursor could not be placed in the log.
	Reset bool `json:"reset,omitempty"`
}

// FinalAnswer is the text of the last assistant message of a thread's latest
// run (GET /v1/threads/{id}/final-answer).
type FinalAnswer struct {
	Content string `json:"content"`
	// Complete is true iff the run is terminal.
	Complete    bool   `json:"complete"`
	CompletedAt Time   `json:"completed_at"`
	RunID       string `json:"run_id"`
	MessageID   string `json:"message_id"`
	Status      string `json:"status,omitempty"`
	// Offset is the thread's offset the answer is as of: a subscription
	// from it continues exactly after what the answer holds.
	Offset Offset `json:"offset"`
}
