package tether

import "encoding/json"

// RunStatus is the status of a run:
// pending → running ⇄ waiting → done | error | cancelled | aborted.
type RunStatus string

// Run statuses. The last four are terminal.
const (
	RunPending   RunStatus = "pending"   // accepted, not yet taken by a worker
	RunRunning   RunStatus = "running"   // a worker or in-process agent is producing events
	RunWaiting   RunStatus = "waiting"   // waits for input (run.waiting)
	RunDone      RunStatus = "done"      // finished normally
	RunError     RunStatus = "error"     // the agent reported an error
	RunCancelled RunStatus = "cancelled" // a client cancelled it
	RunAborted   RunStatus = "aborted"   // the server ended it: worker lost, restart, lease expired
)

// Terminal reports whether s is a final status.
func (s RunStatus) Terminal() bool {
	switch s {
	case RunDone, RunError, RunCancelled, RunAborted:
		return true
	}
	return false
}

// Active reports whether a run with status s holds its thread (running or
// waiting).
func (s RunStatus) Active() bool { return s == RunRunning || s == RunWaiting }

// Multitask says what to do with a new run while the thread has an active run.
type Multitask string

// Multitask strategies.
const (
	MultitaskReject    Multitask = "reject"    // 409 run_active (the default)
	MultitaskEnqueue   Multitask = "enqueue"   // the run waits until the active one ends
	MultitaskInterrupt Multitask = "interrupt" // the active run is cancelled first
)

// Run is one execution of an agent on a thread.
type Run struct {
	ID           string          `json:"id"`
	ThreadID     string          `json:"thread_id"`
	Agent        string          `json:"agent"`
	Input        RunInput        `json:"input"`
	Status       RunStatus       `json:"status"`
	Error        *ErrorInfo      `json:"error,omitempty"`
	Metadata     json.RawMessage `json:"metadata"`
	CreatedAt    Time            `json:"created_at"`
	StartedAt    Time            `json:"started_at"`
	LastUpdateAt Time            `json:"last_update_at"`
	CompletedAt  Time            `json:"completed_at"`
	Attempt      int             `json:"attempt"`
	// WorkerID names the worker (or in-process agent) that holds the run.
	WorkerID string `json:"worker_id,omitempty"`
	// CancelRequestedAt is set once a client asked to cancel the run.
	CancelRequestedAt Time `json:"cancel_requested_at"`
	// Request is the open request of a waiting run.
	Request *Request `json:"request,omitempty"`
}

// MarshalJSON encodes empty metadata as {}.
func (r Run) MarshalJSON() ([]byte, error) {
	type plain Run
	return json.Marshal(struct {
		plain
		Metadata json.RawMessage `json:"metadata"`
	}{plain(r), objectOrEmpty(r.Metadata)})
}

// RunInput is what a run starts from.
type RunInput struct {
	Messages []InputMessage `json:"messages"`
}

// MarshalJSON encodes no messages as an empty list.
func (in RunInput) MarshalJSON() ([]byte, error) {
	msgs := in.Messages
	if msgs == nil {
		msgs = []InputMessage{}
	}
	return json.Marshal(struct {
		Messages []InputMessage `json:"messages"`
	}{msgs})
}

// InputMessage is one message of a run's input. It becomes a complete
// message of the thread (a message.created event).
type InputMessage struct {
	ID       string          `json:"id,omitempty"`
	Role     Role            `json:"role"`
	Content  string          `json:"content"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// Request is what a waiting run asks for (run.waiting).
type Request struct {
	ID      string          `json:"id"`
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload,omitempty"`
}
