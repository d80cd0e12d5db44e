package tether

import "encoding/json"

// ThreadStatus is the status of a thread, derived from its runs.
type ThreadStatus string

// Thread statuses.
const (
	ThreadIdle    ThreadStatus = "idle"    // no active run; the last run (if any) ended done or cancelled
	ThreadBusy    ThreadStatus = "busy"    // a run is pending or running
	ThreadWaiting ThreadStatus = "waiting" // the active run waits for input
	ThreadError   ThreadStatus = "error"   // no active run; the last run ended error or aborted
)

// Thread is a conversation: one ordered event log and the runs on it.
type Thread struct {
	ID        string          `json:"id"`
	Status    ThreadStatus    `json:"status"`
	Metadata  json.RawMessage `json:"metadata"`
	CreatedAt Time            `json:"created_at"`
	UpdatedAt Time            `json:"updated_at"`
	// LastOffset is the offset of the thread's last event, or OffsetStart
	// when the log is empty.
	LastOffset Offset `json:"last_offset"`
	// ActiveRunID is the run that is running or waiting, else the oldest
	// pending run, else empty (null on the wire).
	ActiveRunID string `json:"active_run_id"`
	// Owner is the subject (sub) of the signed token that created the
	// thread; empty (left out on the wire) for threads created with a
	// static key or without auth. It never changes.
	Owner string `json:"owner,omitempty"`
}

// MarshalJSON encodes an empty ActiveRunID as null and empty metadata as {}.
func (t Thread) MarshalJSON() ([]byte, error) {
	type plain Thread
	return json.Marshal(struct {
		plain
		ActiveRunID *string         `json:"active_run_id"`
		Metadata    json.RawMessage `json:"metadata"`
	}{plain(t), nullable(t.ActiveRunID), objectOrEmpty(t.Metadata)})
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

var emptyObject = json.RawMessage(`{}`)

func objectOrEmpty(m json.RawMessage) json.RawMessage {
	if len(m) == 0 || string(m) == "null" {
		return emptyObject
	}
	return m
}
