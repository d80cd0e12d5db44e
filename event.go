package tether

import (
	"bytes"
	"encoding/json"
	"sync"
)

// Event types a worker (or in-process agent) appends.
const (
	EventMessageStarted  = "message.started"
	EventTextDelta       = "text.delta"
	EventReasoningDelta  = "reasoning.delta"
	EventToolStarted     = "tool.started"
	EventToolDelta       = "tool.delta"
	EventToolFinished    = "tool.finished"
	EventMessageUpdated  = "message.updated"
	EventMessageFinished = "message.finished"
	EventMessageCreated  = "message.created"
	EventRunWaiting      = "run.waiting"
	EventCustom          = "custom"
	EventStateSnapshot   = "state.snapshot"
	EventStateDelta      = "state.delta"
	EventRunFinished     = "run.finished"
)

// Event types only the server appends.
const (
	EventRunCreated         = "run.created"
	EventRunStarted         = "run.started"
	EventRunInput           = "run.input"
	EventRunCancelRequested = "run.cancel_requested"
)

// Event is one entry of a thread's log. The server sets Offset, TS and RunID;
// the other fields depend on Type (see docs/protocol.md §3).
type Event struct {
	Offset Offset `json:"offset,omitempty"`
	Type   string `json:"type"`
	TS     Time   `json:"ts"`
	RunID  string `json:"run_id,omitempty"`

	MessageID string          `json:"message_id,omitempty"`
	Role      Role            `json:"role,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	Delta     string          `json:"delta,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	Error     json.RawMessage `json:"error,omitempty"`
	Status    string          `json:"status,omitempty"`
	Request   *Request        `json:"request,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Run       *Run            `json:"run,omitempty"`
	Message   *Message        `json:"message,omitempty"`
	WorkerID  string          `json:"worker_id,omitempty"`
	Attempt   int             `json:"attempt,omitempty"`
	RequestID string          `json:"request_id,omitempty"`
	Value     json.RawMessage `json:"value,omitempty"`
	State     json.RawMessage `json:"state,omitempty"`
	Patch     json.RawMessage `json:"patch,omitempty"`
}

// Encode returns the JSON of e without its offset: the form that is
// committed, to which the store adds the offset with [WithOffset]. Encoding
// once per event, before the commit, keeps JSON work off the single writer.
func (e *Event) Encode() ([]byte, error) {
	if b, ok := appendEvent(make([]byte, 0, encodeSize(e)), e); ok {
		return b, nil
	}
	if e.Offset == "" {
		return json.Marshal(e)
	}
	c := *e
	c.Offset = ""
	return json.Marshal(&c)
}

// WithOffset returns the encoding of an event (as made by [Event.Encode])
// with its offset set as the first field.
func WithOffset(body []byte, o Offset) []byte {
	out := make([]byte, 0, len(body)+len(o)+12)
	out = append(out, `{"offset":"`...)
	out = append(out, o...)
	out = append(out, `",`...)
	return append(out, body[1:]...)
}

// DecodeEvents decodes a JSON array of events sent by a worker. Unknown
// fields and fields of the wrong type are errors (code bad_request); what
// each event type requires is checked by the state machine (package runs).
func DecodeEvents(data []byte) ([]*Event, error) {
	if evs, ok := decodeEventsFast(data); ok {
		return evs, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var evs []*Event
	if err := dec.Decode(&evs); err != nil {
		return nil, Errorf(CodeBadRequest, "events: %s", JSONError(err))
	}
	if dec.More() {
		return nil, Errorf(CodeBadRequest, "events: unexpected data after the JSON array")
	}
	for i, e := range evs {
		if e == nil {
			return nil, Errorf(CodeBadRequest, "event %d is null", i)
		}
	}
	return evs, nil
}

// Record is a committed event as readers get it: its offset, the fields
// subscriptions filter on, and its JSON (offset included). Records are
// shared by every reader and must not be modified.
type Record struct {
	Offset    Offset
	Type      string
	RunID     string
	MessageID string
	Data      []byte

	sseOnce sync.Once
	sse     []byte
}

// NewRecord returns the record of a committed event with its JSON.
func NewRecord(e *Event, data []byte) *Record {
	return &Record{Offset: e.Offset, Type: e.Type, RunID: e.RunID, MessageID: e.MessageID, Data: data}
}

// SSE returns the record as one Server-Sent Events frame (id, event, data).
// The frame is built once and shared by every subscriber.
func (r *Record) SSE() []byte {
	r.sseOnce.Do(func() {
		b := make([]byte, 0, len(r.Data)+len(r.Offset)+len(r.Type)+24)
		b = append(b, "id: "...)
		b = append(b, r.Offset...)
		b = append(b, "\nevent: "...)
		b = append(b, r.Type...)
		b = append(b, "\ndata: "...)
		b = append(b, r.Data...)
		r.sse = append(b, "\n\n"...)
	})
	return r.sse
}

// Size is the number of bytes a record holds, for buffer accounting.
func (r *Record) Size() int { return len(r.Data) + len(r.Offset) + 64 }

// Decode returns the event of the record.
func (r *Record) Decode() (*Event, error) {
	var e Event
	if err := json.Unmarshal(r.Data, &e); err != nil {
		return nil, err
	}
	return &e, nil
}
