package agui

import (
	"encoding/json"

	tether "github.com/tetherhq/tether"
)

// AG-UI event types the projection sends.
const (
	RunStarted              = "RUN_STARTED"
	RunFinished             = "RUN_FINISHED"
	RunError                = "RUN_ERROR"
	TextMessageStart        = "TEXT_MESSAGE_START"
	TextMessageContent      = "TEXT_MESSAGE_CONTENT"
	TextMessageEnd          = "TEXT_MESSAGE_END"
	ToolCallStart           = "TOOL_CALL_START"
	ToolCallArgs            = "TOOL_CALL_ARGS"
	ToolCallEnd             = "TOOL_CALL_END"
	ToolCallResult          = "TOOL_CALL_RESULT"
	ReasoningStart          = "REASONING_START"
	ReasoningMessageStart   = "REASONING_MESSAGE_START"
	ReasoningMessageContent = "REASONING_MESSAGE_CONTENT"
	ReasoningMessageEnd     = "REASONING_MESSAGE_END"
	ReasoningEnd            = "REASONING_END"
	MessagesSnapshot        = "MESSAGES_SNAPSHOT"
	StateSnapshot           = "STATE_SNAPSHOT"
	StateDelta              = "STATE_DELTA"
	StepStarted             = "STEP_STARTED"
	StepFinished            = "STEP_FINISHED"
	Custom                  = "CUSTOM"
)

// Event is one AG-UI event: a JSON object whose "type" says which. Events
// are built by the projector for one stream and may be changed by it (the
// HTTP layer sets the runId of the run a POST serves).
type Event map[string]any

// Type returns the event's type.
func (e Event) Type() string { s, _ := e["type"].(string); return s }

func ev(typ string, kv ...any) Event {
	e := Event{"type": typ}
	for i := 0; i+1 < len(kv); i += 2 {
		e[kv[i].(string)] = kv[i+1]
	}
	return e
}

// Frame is one AG-UI event of a stream and where in the Tether log it comes
// from.
type Frame struct {
	Event Event
	// Offset is the offset of the Tether event the frame was made from, or
	// the snapshot's for the join prelude. One Tether event may make
	// several frames; they share its offset.
	Offset tether.Offset
	// Last marks the last frame made from its Tether event (or of the
	// prelude): the only one that carries the SSE id line, so that a client
	// resuming from an id never misses the rest of a group.
	Last bool
	// Prelude marks the frames of a join prelude.
	Prelude bool
	// RunID is the Tether run the frame belongs to ("" for none).
	RunID string
}

// Terminal reports whether the frame ends an AG-UI run (RUN_FINISHED, with
// any outcome, or RUN_ERROR).
func (f Frame) Terminal() bool {
	t := f.Event.Type()
	return t == RunFinished || t == RunError
}

// Metadata is what the projection adds to every event's metadata, under
// the key "tether".
type Metadata struct {
	// Offset is the Tether offset the frame comes from: resuming a Tether
	// subscription after it continues after this frame's group.
	Offset tether.Offset `json:"offset"`
	// RunID is the Tether run, when the frame belongs to one.
	RunID string `json:"run_id,omitempty"`
	// Prelude is set on the frames of a join prelude.
	Prelude bool `json:"prelude,omitempty"`
}

// JSON returns the frame's event as JSON, with the Tether metadata merged
// into the event's own metadata (an upstream event's is kept).
func (f Frame) JSON() []byte {
	e := make(Event, len(f.Event)+1)
	for k, v := range f.Event {
		e[k] = v
	}
	md := map[string]any{}
	if own, ok := f.Event["metadata"].(map[string]any); ok {
		for k, v := range own {
			md[k] = v
		}
	}
	md["tether"] = Metadata{Offset: f.Offset, RunID: f.RunID, Prelude: f.Prelude}
	e["metadata"] = md
	b, err := json.Marshal(e)
	if err != nil {
		// Every value is built from valid JSON; this cannot happen.
		panic("agui: encode event: " + err.Error())
	}
	return b
}

// SSE returns the frame as one Server-Sent Events frame: "data: <json>"
// and, on the last frame of its group, "id: <offset>"; lines end with LF
// only (HttpAgent's parser splits on "\n\n").
func (f Frame) SSE() []byte {
	data := f.JSON()
	b := make([]byte, 0, len(data)+len(f.Offset)+16)
	if f.Last && f.Offset != "" && f.Offset != tether.OffsetStart {
		b = append(b, "id: "...)
		b = append(b, f.Offset...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

// raw decodes a stored JSON value for an event field: values the log holds
// are valid JSON; an empty one is null.
func raw(v json.RawMessage) any {
	if len(v) == 0 {
		return nil
	}
	return json.RawMessage(v)
}
