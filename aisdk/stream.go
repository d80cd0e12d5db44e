package aisdk

import (
	"encoding/json"
	"strconv"

	tether "github.com/tetherhq/tether"
)

// Stream projects the events of one run onto the chunks of the run's UI
// message. It is a state machine fed the run's events in log order (the
// events of other runs are ignored); the same events always give the same
// chunks, so a replay, a resume and the live stream agree to the byte.
// A Stream is not safe for concurrent use.
type Stream struct {
	runID   string
	id      string // the UI message's id, once start was sent
	started bool
	// claimed is set once the run was claimed: complete messages created
	// before are the run's input (made with run.created), not its answer.
	claimed bool
	// ended is set while the last chunk made is terminal (finish,
	// abort): after run.finished for good; after a waiting point until
	// the run goes on (what follows is another stream's: the answer's).
	ended bool
	final bool                 // the run finished
	msgs  map[string]*msgState // assistant messages of the run
	// req is the open request of the run, if the stream showed one
	// (run.input answers it); gate is the call whose part shows it as
	// the call's approval (nil: it is a dynamic tool part of its own).
	req  *tether.Request
	gate *toolState
	// steps counts the UI message's start-step chunks: useChat finds the
	// part a tool-input-available updates in the current step only.
	steps int
}

// msgState is what the projection tracks of one assistant message: enough
// to mirror the reducer's rule that text appends to the last part when it
// is text, and to close what it opened.
type msgState struct {
	id      string
	parts   int    // parts the message has
	last    string // the type of its last part
	open    string // the UI id of the open text or reasoning part
	tools   map[string]*toolState
	order   []string // tool call ids, in order
	stepEnd bool     // finish-step sent
	// asked is set at a waiting point: what the message streams after
	// the answer is a new step.
	asked bool
}

type toolState struct {
	msg     string // its message's id
	id      string
	name    string
	input   []byte // streamed input
	running bool
	step    int // the step its part is in (Stream.steps)
	// approval is set once its part was asked for an approval (whose id
	// is ApprovalID's).
	approval bool
}

// NewStream returns the projection of a run, before any event after its
// status: a pending run's stream starts at or before its run.created, a
// claimed run's anywhere after its run.started.
func NewStream(run tether.Run) *Stream {
	return &Stream{runID: run.ID, claimed: run.Status != tether.RunPending, msgs: map[string]*msgState{}}
}

// MessageID returns the UI message's id once the start chunk was made,
// else "".
func (s *Stream) MessageID() string { return s.id }

// Ended reports whether the stream has made its terminal chunk (finish or
// abort): nothing follows it.
func (s *Stream) Ended() bool { return s.ended }

// partID is the UI id of a message's text or reasoning part: the same
// whether the part is streamed live, rebuilt from a snapshot or resumed.
// A part re-opened after a waiting point keeps its id (useChat then holds
// it as two parts, the text unchanged), so that a stream rebuilt from a
// snapshot, which holds it as one, continues it with the same id.
func partID(msgID string, index int) string {
	return msgID + "-" + strconv.Itoa(index)
}

// Event returns the chunks of one event (none for most events the UI does
// not show). It never fails: an event it cannot place (a message it never
// saw start, which a log cannot hold) gives no chunks.
func (s *Stream) Event(ev *tether.Event) []Chunk {
	if ev.RunID != s.runID {
		return nil
	}
	if s.final {
		return nil
	}
	out := s.event(ev)
	// Transient chunks (custom events, the thread's state) are no part
	// of the message: they do not move the stream past its end.
	for i := len(out) - 1; i >= 0; i-- {
		if !out[i].Transient {
			s.ended = out[i].Terminal()
			break
		}
	}
	return out
}

func (s *Stream) event(ev *tether.Event) []Chunk {
	var out []Chunk
	switch ev.Type {
	case tether.EventMessageStarted:
		if ev.Role != tether.RoleAssistant || s.msgs[ev.MessageID] != nil {
			return nil
		}
		out = s.startMessage(out, ev.MessageID, ev.Metadata)
	case tether.EventRunStarted:
		s.claimed = true
	case tether.EventMessageCreated:
		if !s.claimed || ev.Message == nil || ev.Message.Role != tether.RoleAssistant || s.msgs[ev.Message.ID] != nil {
			return nil
		}
		out = s.created(out, ev.Message)
	case tether.EventTextDelta, tether.EventReasoningDelta:
		m := s.msgs[ev.MessageID]
		if m == nil || m.stepEnd || ev.Delta == "" {
			return nil
		}
		out = s.text(out, m, ev.Type == tether.EventReasoningDelta, ev.Delta)
	case tether.EventToolStarted:
		m := s.msgs[ev.MessageID]
		if m == nil || m.stepEnd || m.tools[ev.CallID] != nil {
			return nil
		}
		out = s.closePart(out, m)
		out = s.step(out, m, tether.PartTool)
		m.tools[ev.CallID] = &toolState{msg: m.id, id: ev.CallID, name: ev.Name, running: true, step: s.steps}
		m.order = append(m.order, ev.CallID)
		m.parts++
		m.last = tether.PartTool
		out = append(out, Chunk{Type: ChunkToolInputStart, ToolCallID: ev.CallID, ToolName: ev.Name})
	case tether.EventToolDelta:
		m := s.msgs[ev.MessageID]
		if m == nil {
			return nil
		}
		t := m.tools[ev.CallID]
		if t == nil || !t.running || ev.Delta == "" {
			return nil
		}
		t.input = append(t.input, ev.Delta...)
		out = append(out, Chunk{Type: ChunkToolInputDelta, ToolCallID: ev.CallID, Delta: ev.Delta})
	case tether.EventToolFinished:
		m := s.msgs[ev.MessageID]
		if m == nil {
			return nil
		}
		t := m.tools[ev.CallID]
		if t == nil || !t.running {
			return nil
		}
		input := ev.Input
		if len(input) == 0 {
			input = streamedInput(t.input)
		}
		out = s.finishTool(out, ev.CallID, t, input, ev.Output, ev.Error)
	case tether.EventMessageUpdated:
		if m := s.msgs[ev.MessageID]; m != nil && m.id == s.id {
			out = append(out, Chunk{Type: ChunkMessageMetadata, Metadata: ev.Metadata})
		}
	case tether.EventMessageFinished:
		m := s.msgs[ev.MessageID]
		if m == nil || m.stepEnd {
			return nil
		}
		out = s.endMessage(out, m, tether.MessageStatus(ev.Status))
	case tether.EventRunWaiting:
		if ev.Request == nil {
			return nil
		}
		out = s.waiting(out, ev.Request)
	case tether.EventRunInput:
		if s.req != nil && ev.RequestID == s.req.ID {
			// The answer to the request a waiting point showed.
			s.req = nil
			if t := s.gate; t != nil {
				s.gate = nil
				out = s.approvalResponse(out, t, ev.Value)
				break
			}
			out = append(out, Chunk{Type: ChunkToolOutput, ToolCallID: ev.RequestID, Output: ev.Value, Dynamic: true})
		}
	case tether.EventCustom:
		out = append(out, Chunk{Type: ChunkDataPrefix + ev.Name, Data: ev.Data, Transient: true})
	case tether.EventStateSnapshot:
		out = append(out, Chunk{Type: ChunkState, Data: ev.State, Transient: true})
	case tether.EventStateDelta:
		out = append(out, Chunk{Type: ChunkStateDelta, Data: ev.Patch, Transient: true})
	case tether.EventRunFinished:
		out = s.finished(out, tether.RunStatus(ev.Status), ev.Error)
	}
	return out
}

// start makes the start chunk, once.
func (s *Stream) start(out []Chunk, id string, metadata json.RawMessage) []Chunk {
	if s.started {
		return out
	}
	s.started, s.id = true, id
	if isEmptyObject(metadata) {
		metadata = nil
	}
	return append(out, Chunk{Type: ChunkStart, MessageID: id, Metadata: metadata})
}

func (s *Stream) startMessage(out []Chunk, id string, metadata json.RawMessage) []Chunk {
	out = s.start(out, id, metadata)
	s.msgs[id] = &msgState{id: id, tools: map[string]*toolState{}}
	s.steps++
	return append(out, Chunk{Type: ChunkStartStep})
}

// text streams a text or reasoning delta: into the message's last part if
// it is of the same type (re-opened with a new id if a waiting point
// closed it), else into a new part, closing the open one.
func (s *Stream) text(out []Chunk, m *msgState, reasoning bool, delta string) []Chunk {
	typ, startT, deltaT := tether.PartText, ChunkTextStart, ChunkTextDelta
	if reasoning {
		typ, startT, deltaT = tether.PartReasoning, ChunkReasoningStart, ChunkReasoningDelta
	}
	switch {
	case m.last != typ:
		out = s.newPart(out, m, typ)
	case m.open == "":
		out = s.step(out, m, typ)
		m.open = partID(m.id, m.parts-1)
		out = append(out, Chunk{Type: startT, ID: m.open})
	}
	return append(out, Chunk{Type: deltaT, ID: m.open, Delta: delta})
}

// closePart ends the message's open text or reasoning part.
func (s *Stream) closePart(out []Chunk, m *msgState) []Chunk {
	if m.open == "" {
		return out
	}
	t := ChunkTextEnd
	if m.last == tether.PartReasoning {
		t = ChunkReasoningEnd
	}
	out = append(out, Chunk{Type: t, ID: m.open})
	m.open = ""
	return out
}

// endMessage closes a message as the reducer does: its running tool calls
// end done if the message is done, else error.
func (s *Stream) endMessage(out []Chunk, m *msgState, status tether.MessageStatus) []Chunk {
	out = s.closePart(out, m)
	for _, id := range m.order {
		t := m.tools[id]
		if !t.running {
			continue
		}
		var errv json.RawMessage
		if status != tether.MessageDone {
			errv = json.RawMessage(`"The tool call did not finish."`)
		}
		out = s.finishTool(out, id, t, streamedInput(t.input), nil, errv)
	}
	m.stepEnd = true
	return append(out, Chunk{Type: ChunkFinishStep})
}

// created streams a complete assistant message (message.created) as one
// step.
func (s *Stream) created(out []Chunk, msg *tether.Message) []Chunk {
	out = s.startMessage(out, msg.ID, msg.Metadata)
	m := s.msgs[msg.ID]
	for _, p := range msg.Parts {
		out = s.part(out, m, p)
	}
	return s.endMessage(out, m, msg.Status)
}

// part streams one part of a message as it stands in a snapshot (or a
// message.created): text whole, a tool call with what is known of it.
func (s *Stream) part(out []Chunk, m *msgState, p tether.Part) []Chunk {
	switch p.Type {
	case tether.PartText, tether.PartReasoning:
		// Each part of a snapshot is a part of its own, as the reducer
		// keeps it (a message.created may hold two text parts in a row).
		out = s.newPart(out, m, p.Type)
		if p.Text != "" {
			t := ChunkTextDelta
			if p.Type == tether.PartReasoning {
				t = ChunkReasoningDelta
			}
			out = append(out, Chunk{Type: t, ID: m.open, Delta: p.Text})
		}
		return out
	case tether.PartTool:
		out = s.closePart(out, m)
		out = s.step(out, m, tether.PartTool)
		t := &toolState{msg: m.id, id: p.CallID, name: p.Name, running: true, input: []byte(p.InputText), step: s.steps}
		m.tools[p.CallID] = t
		m.order = append(m.order, p.CallID)
		m.parts++
		m.last = tether.PartTool
		out = append(out, Chunk{Type: ChunkToolInputStart, ToolCallID: p.CallID, ToolName: p.Name})
		if p.Status == tether.ToolRunning {
			if p.InputText != "" {
				out = append(out, Chunk{Type: ChunkToolInputDelta, ToolCallID: p.CallID, Delta: p.InputText})
			}
			return out
		}
		errv := p.Error
		if p.Status == tether.ToolError && len(errv) == 0 {
			errv = json.RawMessage(`"The tool call did not finish."`)
		}
		input := p.Input
		if len(input) == 0 {
			// A call its message ended keeps its streamed input as text.
			input = streamedInput([]byte(p.InputText))
		}
		return s.finishTool(out, p.CallID, t, input, p.Output, errv)
	case tether.PartData:
		out = s.closePart(out, m)
		m.parts++
		m.last = tether.PartData
		return append(out, Chunk{Type: ChunkDataPrefix + p.Name, Data: p.Data})
	}
	return out
}

// step starts a new step for a part of type typ where the AI SDK's
// model has one: after tool calls (a step ends with its tool calls; what
// the model says with their results is the next one), and after a
// waiting point. useChat's lastAssistantMessageIsCompleteWithToolCalls
// looks at the last step: without this, every answer with a tool call
// would look like one waiting for the app's tool output.
func (s *Stream) step(out []Chunk, m *msgState, typ string) []Chunk {
	split := m.asked || (m.last == tether.PartTool && typ != tether.PartTool)
	m.asked = false
	if split {
		s.steps++
		out = append(out, Chunk{Type: ChunkFinishStep}, Chunk{Type: ChunkStartStep})
	}
	return out
}

// newPart opens a new text or reasoning part, closing the open one.
func (s *Stream) newPart(out []Chunk, m *msgState, typ string) []Chunk {
	out = s.closePart(out, m)
	out = s.step(out, m, typ)
	m.parts++
	m.last = typ
	m.open = partID(m.id, m.parts-1)
	if typ == tether.PartReasoning {
		return append(out, Chunk{Type: ChunkReasoningStart, ID: m.open})
	}
	return append(out, Chunk{Type: ChunkTextStart, ID: m.open})
}

// finishTool ends a tool call: its input, then its output or error. A
// call whose part is in an earlier step (text or reasoning followed it
// while it ran) gets its output only: useChat looks for the part a
// tool-input-available updates in the current step alone, and would add
// a second part for the call, the first left streaming its input for
// good; the output finds the part wherever it is. The part then keeps the
// input streamed into it (an input given only as the call finished is
// not shown there until the message is loaded again).
func (s *Stream) finishTool(out []Chunk, callID string, t *toolState, input, output, errv json.RawMessage) []Chunk {
	t.running = false
	if t.step == s.steps {
		out = append(out, Chunk{Type: ChunkToolInputAvailable, ToolCallID: callID, ToolName: t.name, Input: input})
	}
	switch reason, denied := deniedReason(errv); {
	case denied:
		out = s.deny(out, t, reason)
	case len(errv) > 0 && string(errv) != "null":
		out = append(out, Chunk{Type: ChunkToolOutputError, ToolCallID: callID, ErrorText: errorText(errv)})
	default:
		out = append(out, Chunk{Type: ChunkToolOutput, ToolCallID: callID, Output: output})
	}
	if t == s.gate {
		// The call ended while its approval was asked: the request,
		// still open, is shown as it would be rebuilt now.
		out = s.ungate(out)
	}
	return out
}

// waiting shows the run's request, and ends the stream: useChat lets the
// app answer only once the stream is over, and sends the answer in its
// next request. An approval of a running call of the run is asked on the
// call's part (addToolApprovalResponse answers it); any other request is
// a dynamic tool call waiting for its output (addToolOutput). Open parts
// are closed first; text that follows the answer is a new part.
func (s *Stream) waiting(out []Chunk, req *tether.Request) []Chunk {
	out = s.start(out, s.runID, nil)
	for _, m := range s.running() {
		out = s.closePart(out, m)
		m.asked = true
	}
	s.req = req
	if t := s.gated(req); t != nil {
		out = s.askApproval(out, t)
	} else {
		out = append(out, s.requestPart(req))
	}
	return append(out, Chunk{Type: ChunkFinish, FinishReason: FinishToolCalls})
}

// finished ends the stream as the run ended: its running messages end as
// the reducer ends them, then finish (done), abort (cancelled), or error
// and finish (error, aborted).
func (s *Stream) finished(out []Chunk, status tether.RunStatus, errInfo json.RawMessage) []Chunk {
	msgStatus := tether.MessageAborted
	switch status {
	case tether.RunDone:
		msgStatus = tether.MessageDone
	case tether.RunError:
		msgStatus = tether.MessageError
	}
	if s.req != nil && s.gate == nil {
		// A request the run ended without an answer to: not pending
		// any more (the snapshot keeps only the open request).
		out = append(out, Chunk{Type: ChunkToolOutputError, ToolCallID: s.req.ID, ErrorText: "The run ended before the request was answered."})
	}
	// An approval the run ended without an answer to ends with its call
	// (below), as a call its message ended.
	s.req, s.gate = nil, nil
	for _, m := range s.running() {
		out = s.endMessage(out, m, msgStatus)
	}
	s.final = true
	switch status {
	case tether.RunDone:
		return append(out, Chunk{Type: ChunkFinish, FinishReason: FinishStop})
	case tether.RunCancelled:
		return append(out, Chunk{Type: ChunkAbort, Reason: "cancelled"})
	}
	return append(out, Chunk{Type: ChunkError, ErrorText: runErrorText(status, errInfo)},
		Chunk{Type: ChunkFinish, FinishReason: FinishError})
}

// running returns the run's messages that have not ended, in the order
// they started.
func (s *Stream) running() []*msgState {
	var ms []*msgState
	for _, m := range s.msgs {
		if !m.stepEnd {
			ms = append(ms, m)
		}
	}
	// Few messages run at once; keep the order stable for determinism.
	for i := 1; i < len(ms); i++ {
		for j := i; j > 0 && ms[j].id < ms[j-1].id; j-- {
			ms[j], ms[j-1] = ms[j-1], ms[j]
		}
	}
	return ms
}

// streamedInput is a tool call's input from its streamed text, as the
// reducer takes it: the JSON if it parses, else the text as a JSON string,
// null if there is none.
func streamedInput(text []byte) json.RawMessage {
	switch {
	case len(text) == 0:
		return nil
	case json.Valid(text):
		return json.RawMessage(text)
	}
	b, _ := json.Marshal(string(text))
	return b
}

// errorText is the text of a tool call's error: a JSON string as is, the
// message field of an object, else the JSON.
func errorText(errv json.RawMessage) string {
	var s string
	if json.Unmarshal(errv, &s) == nil {
		return s
	}
	var o struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(errv, &o) == nil && o.Message != "" {
		return o.Message
	}
	return string(errv)
}

// runErrorText is the errorText of a run that ended error or aborted.
func runErrorText(status tether.RunStatus, errInfo json.RawMessage) string {
	var e tether.ErrorInfo
	if len(errInfo) > 0 && json.Unmarshal(errInfo, &e) == nil && e.Message != "" {
		return e.Message
	}
	if status == tether.RunAborted {
		return "The run was aborted."
	}
	return "The run failed."
}

func isEmptyObject(b json.RawMessage) bool {
	switch string(b) {
	case "", "null", "{}":
		return true
	}
	return false
}
