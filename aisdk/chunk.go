package aisdk

import (
	"encoding/json"
)

// Chunk types of the UI message stream that the projection emits.
const (
	ChunkStart              = "start"
	ChunkStartStep          = "start-step"
	ChunkFinishStep         = "finish-step"
	ChunkTextStart          = "text-start"
	ChunkTextDelta          = "text-delta"
	ChunkTextEnd            = "text-end"
	ChunkReasoningStart     = "reasoning-start"
	ChunkReasoningDelta     = "reasoning-delta"
	ChunkReasoningEnd       = "reasoning-end"
	ChunkToolInputStart     = "tool-input-start"
	ChunkToolInputDelta     = "tool-input-delta"
	ChunkToolInputAvailable = "tool-input-available"
	ChunkToolOutput         = "tool-output-available"
	ChunkToolOutputError    = "tool-output-error"
	// ChunkToolApprovalRequest asks for the approval of a call's part
	// (an approval request of the run); ChunkToolApprovalResponse says
	// what it was answered; ChunkToolOutputDenied ends a denied call.
	ChunkToolApprovalRequest  = "tool-approval-request"
	ChunkToolApprovalResponse = "tool-approval-response"
	ChunkToolOutputDenied     = "tool-output-denied"
	ChunkMessageMetadata      = "message-metadata"
	ChunkFinish               = "finish"
	ChunkError                = "error"
	ChunkAbort                = "abort"
	// ChunkDataPrefix starts the type of a data chunk: "data-" + its name.
	ChunkDataPrefix = "data-"
	// ChunkState carries the thread's state, whole (state.snapshot, and
	// first in a rebuild); ChunkStateDelta a JSON Patch to it
	// (state.delta). Both are transient: the state is the thread's, not
	// a part of a message.
	ChunkState      = "data-state"
	ChunkStateDelta = "data-state-delta"
)

// Finish reasons of the finish chunk.
const (
	FinishStop      = "stop"
	FinishToolCalls = "tool-calls"
	FinishError     = "error"
)

// Chunk is one UI message chunk. Which fields are used depends on Type;
// MarshalJSON writes exactly those (the AI SDK validates chunks against
// its schema, and an absent field is not the same as an empty one).
type Chunk struct {
	Type string
	// MessageID is start's messageId.
	MessageID string
	// Metadata is start's and message-metadata's messageMetadata.
	Metadata json.RawMessage
	// ID is the part id of text-* and reasoning-* chunks, and the optional
	// id of a data chunk.
	ID    string
	Delta string
	// ToolCallID, ToolName, Input, Output and ErrorText are the tool-*
	// chunks'; ErrorText is also error's.
	ToolCallID string
	ToolName   string
	Input      json.RawMessage
	Output     json.RawMessage
	ErrorText  string
	// Dynamic marks a tool whose name the app does not declare (Tether's
	// requests of a waiting run).
	Dynamic bool
	// ApprovalID and Approved are the tool-approval-* chunks'; an
	// approval response's reason is Reason.
	ApprovalID string
	Approved   bool
	// Data is a data chunk's data; Transient keeps it out of the message.
	Data      json.RawMessage
	Transient bool
	// Reason is abort's and tool-approval-response's; FinishReason
	// finish's.
	Reason       string
	FinishReason string
}

// MarshalJSON encodes the fields of the chunk's type.
func (c Chunk) MarshalJSON() ([]byte, error) {
	// JSON from the log is valid by its rules; anything else (a bug, or
	// a hand-made Chunk) is sent as null rather than breaking the frame.
	raw := func(b json.RawMessage) json.RawMessage {
		if len(b) == 0 || !json.Valid(b) {
			return json.RawMessage("null")
		}
		return b
	}
	if len(c.Metadata) > 0 && !json.Valid(c.Metadata) {
		c.Metadata = nil
	}
	switch c.Type {
	case ChunkStart:
		return json.Marshal(struct {
			Type      string          `json:"type"`
			MessageID string          `json:"messageId,omitempty"`
			Metadata  json.RawMessage `json:"messageMetadata,omitempty"`
		}{c.Type, c.MessageID, c.Metadata})
	case ChunkStartStep, ChunkFinishStep:
		return json.Marshal(struct {
			Type string `json:"type"`
		}{c.Type})
	case ChunkTextStart, ChunkTextEnd, ChunkReasoningStart, ChunkReasoningEnd:
		return json.Marshal(struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		}{c.Type, c.ID})
	case ChunkTextDelta, ChunkReasoningDelta:
		return json.Marshal(struct {
			Type  string `json:"type"`
			ID    string `json:"id"`
			Delta string `json:"delta"`
		}{c.Type, c.ID, c.Delta})
	case ChunkToolInputStart:
		return json.Marshal(struct {
			Type       string `json:"type"`
			ToolCallID string `json:"toolCallId"`
			ToolName   string `json:"toolName"`
			Dynamic    bool   `json:"dynamic,omitempty"`
		}{c.Type, c.ToolCallID, c.ToolName, c.Dynamic})
	case ChunkToolInputDelta:
		return json.Marshal(struct {
			Type       string `json:"type"`
			ToolCallID string `json:"toolCallId"`
			Delta      string `json:"inputTextDelta"`
		}{c.Type, c.ToolCallID, c.Delta})
	case ChunkToolInputAvailable:
		return json.Marshal(struct {
			Type       string          `json:"type"`
			ToolCallID string          `json:"toolCallId"`
			ToolName   string          `json:"toolName"`
			Input      json.RawMessage `json:"input"`
			Dynamic    bool            `json:"dynamic,omitempty"`
		}{c.Type, c.ToolCallID, c.ToolName, raw(c.Input), c.Dynamic})
	case ChunkToolOutput:
		return json.Marshal(struct {
			Type       string          `json:"type"`
			ToolCallID string          `json:"toolCallId"`
			Output     json.RawMessage `json:"output"`
			Dynamic    bool            `json:"dynamic,omitempty"`
		}{c.Type, c.ToolCallID, raw(c.Output), c.Dynamic})
	case ChunkToolOutputError:
		return json.Marshal(struct {
			Type       string `json:"type"`
			ToolCallID string `json:"toolCallId"`
			ErrorText  string `json:"errorText"`
		}{c.Type, c.ToolCallID, c.ErrorText})
	case ChunkToolApprovalRequest:
		return json.Marshal(struct {
			Type       string `json:"type"`
			ApprovalID string `json:"approvalId"`
			ToolCallID string `json:"toolCallId"`
		}{c.Type, c.ApprovalID, c.ToolCallID})
	case ChunkToolApprovalResponse:
		return json.Marshal(struct {
			Type       string `json:"type"`
			ApprovalID string `json:"approvalId"`
			Approved   bool   `json:"approved"`
			Reason     string `json:"reason,omitempty"`
		}{c.Type, c.ApprovalID, c.Approved, c.Reason})
	case ChunkToolOutputDenied:
		return json.Marshal(struct {
			Type       string `json:"type"`
			ToolCallID string `json:"toolCallId"`
		}{c.Type, c.ToolCallID})
	case ChunkMessageMetadata:
		return json.Marshal(struct {
			Type     string          `json:"type"`
			Metadata json.RawMessage `json:"messageMetadata"`
		}{c.Type, raw(c.Metadata)})
	case ChunkFinish:
		return json.Marshal(struct {
			Type         string `json:"type"`
			FinishReason string `json:"finishReason,omitempty"`
		}{c.Type, c.FinishReason})
	case ChunkError:
		return json.Marshal(struct {
			Type      string `json:"type"`
			ErrorText string `json:"errorText"`
		}{c.Type, c.ErrorText})
	case ChunkAbort:
		return json.Marshal(struct {
			Type   string `json:"type"`
			Reason string `json:"reason,omitempty"`
		}{c.Type, c.Reason})
	}
	// A data chunk (the only other type the projection makes).
	return json.Marshal(struct {
		Type      string          `json:"type"`
		ID        string          `json:"id,omitempty"`
		Data      json.RawMessage `json:"data"`
		Transient bool            `json:"transient,omitempty"`
	}{c.Type, c.ID, raw(c.Data), c.Transient})
}

// Terminal reports whether the chunk ends a UI message stream: finish, or
// abort (which the projection sends instead of finish for a cancelled run).
func (c Chunk) Terminal() bool { return c.Type == ChunkFinish || c.Type == ChunkAbort }

// AppendFrame appends c as one frame of the stream, "data: <json>\n\n",
// preceded by "id: <id>\n" when id is set (the offset a client resumes
// from once it has this frame; the AI SDK's parser ignores the line).
func AppendFrame(b []byte, c Chunk, id string) []byte {
	j, err := json.Marshal(c)
	if err != nil {
		j = []byte(`{"type":"error","errorText":"unencodable chunk"}`)
	}
	if id != "" {
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, j...)
	return append(b, "\n\n"...)
}
