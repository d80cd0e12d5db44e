package aisdk

import (
	"encoding/json"
	"strings"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/runs"
)

// UIMessage is a message as the AI SDK's useChat holds it.
type UIMessage struct {
	ID       string          `json:"id"`
	Role     string          `json:"role"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Parts    []UIPart        `json:"parts"`
}

// UIPart is one part of a UIMessage. Which fields are used depends on
// Type: "step-start"; "text" and "reasoning" (Text, State, and ID for
// reasoning); "tool-<name>" and "dynamic-tool" (ToolCallID, ToolName for
// dynamic tools, State, Input, RawInput while it streams, Output,
// ErrorText, Approval once one was asked); "data-<name>" (ID, Data).
type UIPart struct {
	Type       string
	Text       string
	State      string
	ID         string
	ToolCallID string
	ToolName   string
	Input      json.RawMessage
	RawInput   string
	Output     json.RawMessage
	ErrorText  string
	Approval   *UIApproval
	Data       json.RawMessage
}

// UIApproval is a tool part's approval: asked (ID), then answered
// (Approved, Reason).
type UIApproval struct {
	ID       string `json:"id"`
	Approved *bool  `json:"approved,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// Tool part states.
const (
	StateStreaming      = "streaming"
	StateDone           = "done"
	StateInputStreaming = "input-streaming"
	StateInputAvailable = "input-available"
	StateOutput         = "output-available"
	StateOutputError    = "output-error"
	// A call whose approval is asked, answered, and denied.
	StateApprovalRequested = "approval-requested"
	StateApprovalResponded = "approval-responded"
	StateOutputDenied      = "output-denied"
)

// MarshalJSON encodes the fields of the part's type, as useChat does.
func (p UIPart) MarshalJSON() ([]byte, error) {
	raw := func(b json.RawMessage) json.RawMessage {
		if len(b) == 0 || !json.Valid(b) {
			return nil
		}
		return b
	}
	switch {
	case p.Type == "step-start":
		return json.Marshal(struct {
			Type string `json:"type"`
		}{p.Type})
	case p.Type == "text":
		return json.Marshal(struct {
			Type  string `json:"type"`
			Text  string `json:"text"`
			State string `json:"state,omitempty"`
		}{p.Type, p.Text, p.State})
	case p.Type == "reasoning":
		return json.Marshal(struct {
			Type  string `json:"type"`
			ID    string `json:"id,omitempty"`
			Text  string `json:"text"`
			State string `json:"state,omitempty"`
		}{p.Type, p.ID, p.Text, p.State})
	case p.Type == "dynamic-tool" || strings.HasPrefix(p.Type, "tool-"):
		var name string
		if p.Type == "dynamic-tool" {
			name = p.ToolName
		}
		return json.Marshal(struct {
			Type       string          `json:"type"`
			ToolName   string          `json:"toolName,omitempty"`
			ToolCallID string          `json:"toolCallId"`
			State      string          `json:"state"`
			Input      json.RawMessage `json:"input,omitempty"`
			RawInput   string          `json:"rawInput,omitempty"`
			Output     json.RawMessage `json:"output,omitempty"`
			ErrorText  string          `json:"errorText,omitempty"`
			Approval   *UIApproval     `json:"approval,omitempty"`
		}{p.Type, name, p.ToolCallID, p.State, raw(p.Input), p.RawInput, raw(p.Output), p.ErrorText, p.Approval})
	}
	data := raw(p.Data)
	if data == nil {
		data = json.RawMessage("null")
	}
	return json.Marshal(struct {
		Type string          `json:"type"`
		ID   string          `json:"id,omitempty"`
		Data json.RawMessage `json:"data"`
	}{p.Type, p.ID, data})
}

// Apply applies one chunk to m, as useChat's stream processing does (for
// the chunks the projection makes): the message a stream builds is the
// chunks applied in order to an empty assistant message.
func Apply(m *UIMessage, c Chunk) { apply(m, c, nil) }

// partIndex finds the tool parts of a message being built by call id, so
// that a message of n tool calls is built in O(n), not O(n²) as searching
// its parts for each chunk does.
type partIndex map[string]int

// apply is Apply, finding parts through idx if it is not nil (it must then
// have seen every chunk applied to m).
func apply(m *UIMessage, c Chunk, idx partIndex) {
	if m.Role == "" {
		m.Role = "assistant"
	}
	last := func(pred func(*UIPart) bool) *UIPart {
		for i := len(m.Parts) - 1; i >= 0; i-- {
			if pred(&m.Parts[i]) {
				return &m.Parts[i]
			}
		}
		return nil
	}
	tool := func(id string) *UIPart {
		if idx == nil {
			return last(func(p *UIPart) bool { return p.ToolCallID == id })
		}
		if i, ok := idx[id]; ok {
			return &m.Parts[i]
		}
		return nil
	}
	// stepTool is the tool part of the call in the message's current
	// step: useChat looks for the part a tool-input-start or
	// tool-input-available updates there only, and adds a new part if it
	// is not.
	stepTool := func(id string) *UIPart {
		p := tool(id)
		if p == nil {
			return nil
		}
		i := len(m.Parts) - 1
		for ; i >= 0 && &m.Parts[i] != p; i-- {
			if m.Parts[i].Type == "step-start" {
				return nil
			}
		}
		return p
	}
	switch c.Type {
	case ChunkStart:
		if c.MessageID != "" {
			m.ID = c.MessageID
		}
		if !isEmptyObject(c.Metadata) {
			m.Metadata = runs.MergePatch(m.Metadata, c.Metadata)
		}
	case ChunkMessageMetadata:
		m.Metadata = runs.MergePatch(m.Metadata, c.Metadata)
	case ChunkStartStep:
		m.Parts = append(m.Parts, UIPart{Type: "step-start"})
	case ChunkTextStart:
		m.Parts = append(m.Parts, UIPart{Type: "text", State: StateStreaming, ID: c.ID})
	case ChunkReasoningStart:
		m.Parts = append(m.Parts, UIPart{Type: "reasoning", State: StateStreaming, ID: c.ID})
	case ChunkTextDelta, ChunkReasoningDelta, ChunkTextEnd, ChunkReasoningEnd:
		typ := "text"
		if c.Type == ChunkReasoningDelta || c.Type == ChunkReasoningEnd {
			typ = "reasoning"
		}
		p := last(func(p *UIPart) bool { return p.Type == typ && p.ID == c.ID && p.State == StateStreaming })
		if p == nil {
			return
		}
		if c.Type == ChunkTextDelta || c.Type == ChunkReasoningDelta {
			p.Text += c.Delta
		} else {
			p.State = StateDone
		}
	case ChunkToolInputStart, ChunkToolInputAvailable:
		p := stepTool(c.ToolCallID)
		if p == nil {
			m.Parts = append(m.Parts, UIPart{ToolCallID: c.ToolCallID})
			p = &m.Parts[len(m.Parts)-1]
			if idx != nil {
				idx[c.ToolCallID] = len(m.Parts) - 1
			}
		}
		p.Type = "tool-" + c.ToolName
		p.ToolName = ""
		if c.Dynamic {
			p.Type, p.ToolName = "dynamic-tool", c.ToolName
		}
		p.State, p.Input, p.RawInput = StateInputStreaming, nil, ""
		if c.Type == ChunkToolInputAvailable {
			p.State, p.Input = StateInputAvailable, nullIfEmpty(c.Input)
		}
	case ChunkToolInputDelta:
		if p := tool(c.ToolCallID); p != nil {
			p.RawInput += c.Delta
			p.Input = nil
			if json.Valid([]byte(p.RawInput)) {
				p.Input = json.RawMessage(p.RawInput)
			}
		}
	case ChunkToolOutput:
		if p := tool(c.ToolCallID); p != nil {
			p.State, p.Output, p.RawInput = StateOutput, nullIfEmpty(c.Output), ""
		}
	case ChunkToolOutputError:
		if p := tool(c.ToolCallID); p != nil {
			p.State, p.ErrorText = StateOutputError, c.ErrorText
			if p.Type == "dynamic-tool" {
				p.RawInput = "" // a static tool's failure keeps its raw input
			}
		}
	case ChunkToolApprovalRequest:
		if p := tool(c.ToolCallID); p != nil {
			p.State, p.Approval = StateApprovalRequested, &UIApproval{ID: c.ApprovalID}
		}
	case ChunkToolApprovalResponse:
		// useChat finds the part by its approval's id, the first one.
		for i := range m.Parts {
			p := &m.Parts[i]
			if p.Approval == nil || p.Approval.ID != c.ApprovalID {
				continue
			}
			approved := c.Approved
			p.State = StateApprovalResponded
			p.Approval = &UIApproval{ID: c.ApprovalID, Approved: &approved, Reason: p.Approval.Reason}
			if c.Reason != "" {
				p.Approval.Reason = c.Reason
			}
			break
		}
	case ChunkToolOutputDenied:
		if p := tool(c.ToolCallID); p != nil {
			p.State = StateOutputDenied
		}
	default:
		if strings.HasPrefix(c.Type, ChunkDataPrefix) && !c.Transient {
			// Not indexed: the chunks Messages applies have no data ids.
			if c.ID != "" {
				if p := last(func(p *UIPart) bool { return p.Type == c.Type && p.ID == c.ID }); p != nil {
					p.Data = c.Data
					return
				}
			}
			m.Parts = append(m.Parts, UIPart{Type: c.Type, ID: c.ID, Data: c.Data})
		}
	}
}

func nullIfEmpty(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// Prelude returns the chunks that rebuild a run's UI message as of a run
// snapshot (engine.Subscribe's, for a run): start, every part as it
// stands (text whole, in one delta), the last part of a running message
// left open; a waiting run's request; a finished run's end. The thread's
// state, if set, comes first, as a transient data-state chunk. The events
// after the snapshot's offset, given to the returned Stream, continue it.
// A run without an assistant message yet gives no chunks (the start
// comes with its first message).
func Prelude(snap *tether.Snapshot) ([]Chunk, *Stream) {
	if len(snap.Runs) == 0 {
		return nil, NewStream(tether.Run{})
	}
	run := snap.Runs[0]
	s := NewStream(run)
	var out []Chunk
	if len(snap.State) > 0 && string(snap.State) != "null" {
		// The thread's state as of the snapshot: later events patch it.
		out = append(out, Chunk{Type: ChunkState, Data: snap.State, Transient: true})
	}
	for _, msg := range answer(run, snap.Messages) {
		out = s.startMessage(out, msg.ID, msg.Metadata)
		m := s.msgs[msg.ID]
		for _, p := range msg.Parts {
			out = s.part(out, m, p)
		}
		if msg.Status.Terminal() {
			out = s.endMessage(out, m, msg.Status)
		}
	}
	switch {
	case run.Status == tether.RunWaiting && run.Request != nil:
		out = s.waiting(out, run.Request)
		s.ended = true
	case run.Status.Terminal():
		var errInfo json.RawMessage
		if run.Error != nil {
			errInfo, _ = json.Marshal(run.Error)
		}
		out = s.finished(out, run.Status, errInfo)
		s.ended = true
	}
	return out, s
}

// answer returns the messages of a run that make its UI message: its
// assistant messages after its input (the first len(run.Input.Messages)
// messages of the run are the ones created with it).
func answer(run tether.Run, msgs []tether.Message) []tether.Message {
	var out []tether.Message
	n := 0
	for _, m := range msgs {
		if m.RunID != run.ID {
			continue
		}
		n++
		if n <= len(run.Input.Messages) || m.Role != tether.RoleAssistant {
			continue
		}
		out = append(out, m)
	}
	return out
}

// RegenerateKey is the key of a run's metadata, {"ai_sdk": {"regenerates":
// "<UI message id>"}}, that names the answer a run replaces (useChat's
// regenerate): Messages leaves that answer out, and the run is not given
// it (tether.Conversation).
const RegenerateKey = tether.RegeneratesKey

// Messages returns a thread snapshot as useChat's messages: each run's
// input messages (user and system, text only), then the run's answer as
// one assistant message built from its Prelude. An answer that a later
// run regenerates is left out. Messages of other roles are left out.
func Messages(snap *tether.Snapshot) []UIMessage {
	replaced := map[string]bool{}
	for _, r := range snap.Runs {
		if id := Regenerates(r.Metadata); id != "" {
			replaced[id] = true
		}
	}
	byRun := map[string][]tether.Message{}
	for _, m := range snap.Messages {
		byRun[m.RunID] = append(byRun[m.RunID], m)
	}
	out := []UIMessage{}
	for _, r := range snap.Runs {
		msgs := byRun[r.ID]
		for i, m := range msgs {
			if i >= len(r.Input.Messages) {
				break
			}
			if m.Role == tether.RoleUser || m.Role == tether.RoleSystem || m.Role == tether.RoleAssistant {
				out = append(out, inputMessage(m))
			}
		}
		chunks, _ := Prelude(&tether.Snapshot{Runs: []tether.Run{r}, Messages: msgs})
		ui := UIMessage{}
		idx := partIndex{}
		started := false
		for _, c := range chunks {
			started = started || c.Type == ChunkStart
			apply(&ui, c, idx)
		}
		if started && !replaced[ui.ID] {
			if ui.Parts == nil {
				ui.Parts = []UIPart{}
			}
			out = append(out, ui)
		}
	}
	return out
}

// inputMessage is a run's input message as a UIMessage: its text parts.
func inputMessage(m tether.Message) UIMessage {
	ui := UIMessage{ID: m.ID, Role: string(m.Role), Parts: []UIPart{}}
	if !isEmptyObject(m.Metadata) {
		ui.Metadata = m.Metadata
	}
	for _, p := range m.Parts {
		if p.Type == tether.PartText {
			ui.Parts = append(ui.Parts, UIPart{Type: "text", Text: p.Text})
		}
	}
	return ui
}

// Regenerates returns the UI message id a run's metadata says the run
// regenerates, or "" (tether.Regenerates).
func Regenerates(metadata json.RawMessage) string { return tether.Regenerates(metadata) }
