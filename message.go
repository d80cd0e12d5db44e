package tether

import "encoding/json"

// Role is who a message is from.
type Role string

// Message roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
	RoleSystem    Role = "system"
)

// Valid reports whether r is one of the four roles.
func (r Role) Valid() bool {
	switch r {
	case RoleUser, RoleAssistant, RoleTool, RoleSystem:
		return true
	}
	return false
}

// MessageStatus is the status of a message.
type MessageStatus string

// Message statuses. The last three are terminal.
const (
	MessagePending MessageStatus = "pending"
	MessageRunning MessageStatus = "running"
	MessageDone    MessageStatus = "done"
	MessageError   MessageStatus = "error"
	MessageAborted MessageStatus = "aborted"
)

// Terminal reports whether s is a final status.
func (s MessageStatus) Terminal() bool {
	return s == MessageDone || s == MessageError || s == MessageAborted
}

// Message is one message of a thread, made of parts.
type Message struct {
	ID           string          `json:"id"`
	ThreadID     string          `json:"thread_id"`
	RunID        string          `json:"run_id"`
	Role         Role            `json:"role"`
	Status       MessageStatus   `json:"status"`
	Parts        []Part          `json:"parts"`
	Metadata     json.RawMessage `json:"metadata"`
	StartedAt    Time            `json:"started_at"`
	LastUpdateAt Time            `json:"last_update_at"`
}

// MarshalJSON encodes no parts as [] and empty metadata as {}.
func (m Message) MarshalJSON() ([]byte, error) {
	type plain Message
	parts := m.Parts
	if parts == nil {
		parts = []Part{}
	}
	return json.Marshal(struct {
		plain
		Parts    []Part          `json:"parts"`
		Metadata json.RawMessage `json:"metadata"`
	}{plain(m), parts, objectOrEmpty(m.Metadata)})
}

// Part types.
const (
	PartText      = "text"
	PartReasoning = "reasoning"
	PartTool      = "tool"
	PartData      = "data"
)

// Tool call statuses (Part.Status of a tool part).
const (
	ToolRunning = "running"
	ToolDone    = "done"
	ToolError   = "error"
)

// Part is one part of a message. Which fields are used depends on Type:
//
//   - "text", "reasoning": Text.
//   - "tool": CallID, Name, Input, InputText (the streamed input, while it
//     streams), Output, Error, Status.
//   - "data": Name, Data.
type Part struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	InputText string          `json:"input_text,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	Error     json.RawMessage `json:"error,omitempty"`
	Status    string          `json:"status,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
}

// MarshalJSON encodes exactly the fields of the part's type.
func (p Part) MarshalJSON() ([]byte, error) {
	switch p.Type {
	case PartText, PartReasoning:
		return json.Marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{p.Type, p.Text})
	case PartData:
		data := p.Data
		if len(data) == 0 {
			data = json.RawMessage("null")
		}
		return json.Marshal(struct {
			Type string          `json:"type"`
			Name string          `json:"name"`
			Data json.RawMessage `json:"data"`
		}{p.Type, p.Name, data})
	case PartTool:
		input := p.Input
		if len(input) == 0 {
			input = json.RawMessage("null")
		}
		return json.Marshal(struct {
			Type      string          `json:"type"`
			CallID    string          `json:"call_id"`
			Name      string          `json:"name"`
			Input     json.RawMessage `json:"input"`
			InputText string          `json:"input_text,omitempty"`
			Output    json.RawMessage `json:"output,omitempty"`
			Error     json.RawMessage `json:"error,omitempty"`
			Status    string          `json:"status"`
		}{p.Type, p.CallID, p.Name, input, p.InputText, p.Output, p.Error, p.Status})
	}
	type plain Part
	return json.Marshal(plain(p))
}
