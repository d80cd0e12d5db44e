package mapping

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/runs"
)

// Options configure a Mapper.
type Options struct {
	// RunID is the Tether run the events are for: ids the Mapper makes
	// start with it. Required.
	RunID string
	// Taken reports whether a message id is already used in the thread
	// (by an earlier run, or the run's input): an upstream message id
	// that is taken, or not a valid Tether id, is replaced by one the
	// Mapper makes. Defaults to none taken.
	Taken func(id string) bool
	// State is the thread's state when the run started (nil for null):
	// the Mapper follows it through the upstream's STATE_SNAPSHOT and
	// STATE_DELTA events (see State).
	State json.RawMessage
}

// Mapper maps the AG-UI events of one Tether run. See the package doc.
type Mapper struct {
	opts Options
	seq  int

	started bool // RUN_STARTED of the current stream seen
	ended   bool // RUN_FINISHED or RUN_ERROR of the current stream seen
	waiting *tether.Request

	ids   map[string]string // upstream message id → Tether message id
	msgs  map[string]*message
	order []*message       // messages of the run, in start order
	open  []*message       // those not finished (message.finished not sent)
	calls map[string]*call // upstream tool call id → call
	// lastText and lastReasoning are the messages _CHUNK events without a
	// messageId continue.
	lastText, lastReasoning, lastCall string

	state json.RawMessage
}

// message is a Tether message the Mapper started.
type message struct {
	id    string // Tether id
	role  tether.Role
	ended bool // its AG-UI text or reasoning message ended
	done  bool // message.finished sent
	text  strings.Builder
	calls []*call
}

// call is a tool call the Mapper started.
type call struct {
	id, upstream string
	name         string
	msg          *message
	args         strings.Builder
	result       *string // set once TOOL_CALL_RESULT came
}

// New returns a Mapper for one Tether run.
func New(opts Options) *Mapper {
	if opts.Taken == nil {
		opts.Taken = func(string) bool { return false }
	}
	return &Mapper{
		opts:  opts,
		ids:   make(map[string]string),
		msgs:  make(map[string]*message),
		calls: make(map[string]*call),
		state: opts.State,
	}
}

// Ended reports whether the current stream's run ended (RUN_FINISHED or
// RUN_ERROR): nothing more may come in this stream.
func (m *Mapper) Ended() bool { return m.ended }

// Waiting returns the request of a run that ended with an interrupt, nil
// otherwise. Its answer is sent upstream as resume[] with Resume.
func (m *Mapper) Waiting() *tether.Request { return m.waiting }

// Resume prepares the Mapper for the next stream of the same Tether run,
// the one that answers an interrupt: it must start with RUN_STARTED.
func (m *Mapper) Resume() {
	m.started, m.ended, m.waiting = false, false, nil
}

// State returns the thread's state as the upstream left it (nil for
// null): the run's starting state with its STATE_SNAPSHOT and STATE_DELTA
// events applied.
func (m *Mapper) State() json.RawMessage { return m.state }

// upstream is the part of an AG-UI event the mapping reads. Everything is
// optional here; each type checks what it needs.
type upstream struct {
	Type            string          `json:"type"`
	MessageID       *string         `json:"messageId"`
	Role            string          `json:"role"`
	Delta           json.RawMessage `json:"delta"`
	ToolCallID      *string         `json:"toolCallId"`
	ToolCallName    string          `json:"toolCallName"`
	ParentMessageID string          `json:"parentMessageId"`
	Content         json.RawMessage `json:"content"`
	Message         string          `json:"message"`
	Code            json.RawMessage `json:"code"`
	Outcome         json.RawMessage `json:"outcome"`
	Result          json.RawMessage `json:"result"`
	Name            *string         `json:"name"`
	Value           json.RawMessage `json:"value"`
}

// Event maps one upstream event (its JSON) and returns the Tether events
// to append, in order (possibly none). An error means the upstream broke
// AG-UI (IsMalformed) and the run must end; the Mapper must not be used
// after it.
func (m *Mapper) Event(data []byte) ([]*tether.Event, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, malformed("an event that is not a JSON object")
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil || head.Type == "" {
		return nil, malformed("an event that is not a JSON object with a string type")
	}
	typ := printable(head.Type)
	var u upstream
	if known[head.Type] {
		// Other types are kept whole, whatever their fields hold.
		if err := json.Unmarshal(data, &u); err != nil {
			return nil, malformed("%s with a field of the wrong type", typ)
		}
	}
	u.Type = head.Type
	if m.ended {
		return nil, malformed("%s after the run ended", typ)
	}
	if !m.started {
		switch u.Type {
		case "RUN_STARTED":
			m.started = true
			return nil, nil
		case "RUN_ERROR":
			m.started = true
		default:
			return nil, malformed("%s before RUN_STARTED", typ)
		}
	}
	switch u.Type {
	case "RUN_STARTED":
		return nil, malformed("RUN_STARTED while a run is active")
	case "RUN_FINISHED":
		return m.runFinished(data, &u)
	case "RUN_ERROR":
		return m.runError(&u), nil
	case "TEXT_MESSAGE_START":
		return m.start(u.MessageID, u.Role, typ, false)
	case "TEXT_MESSAGE_CONTENT":
		return m.content(u.MessageID, u.Delta, typ, tether.EventTextDelta)
	case "TEXT_MESSAGE_END":
		return m.end(u.MessageID, typ)
	case "TEXT_MESSAGE_CHUNK":
		return m.chunk(&u, typ, tether.EventTextDelta, &m.lastText)
	case "REASONING_MESSAGE_START":
		return m.start(u.MessageID, "", typ, true)
	case "REASONING_MESSAGE_CONTENT":
		return m.content(u.MessageID, u.Delta, typ, tether.EventReasoningDelta)
	case "REASONING_MESSAGE_END":
		return m.end(u.MessageID, typ)
	case "REASONING_MESSAGE_CHUNK":
		return m.chunk(&u, typ, tether.EventReasoningDelta, &m.lastReasoning)
	case "THINKING_TEXT_MESSAGE_START":
		id := m.newID("r")
		m.lastReasoning = id
		return m.start(&id, "", typ, true)
	case "THINKING_TEXT_MESSAGE_CONTENT":
		id := m.lastReasoning
		return m.content(&id, u.Delta, typ, tether.EventReasoningDelta)
	case "THINKING_TEXT_MESSAGE_END":
		id := m.lastReasoning
		return m.end(&id, typ)
	case "REASONING_START", "REASONING_END", "THINKING_START", "THINKING_END":
		return nil, nil
	case "TOOL_CALL_START":
		return m.toolStart(u.ToolCallID, u.ToolCallName, u.ParentMessageID, typ)
	case "TOOL_CALL_ARGS":
		return m.toolArgs(u.ToolCallID, u.Delta, typ)
	case "TOOL_CALL_END":
		if _, err := m.openCall(u.ToolCallID, typ); err != nil {
			return nil, err
		}
		return nil, nil
	case "TOOL_CALL_CHUNK":
		return m.toolChunk(&u, typ)
	case "TOOL_CALL_RESULT":
		return m.toolResult(&u, typ)
	case "STATE_SNAPSHOT":
		return m.stateSnapshot(data, typ)
	case "STATE_DELTA":
		return m.stateDelta(data, typ)
	case "CUSTOM":
		if u.Name == nil || *u.Name == "" {
			return nil, malformed("CUSTOM without a name")
		}
		return []*tether.Event{{Type: tether.EventCustom, Name: *u.Name, Data: nullIfAbsent(u.Value)}}, nil
	}
	// STEP_*, RAW, MESSAGES_SNAPSHOT, ACTIVITY_*, REASONING_ENCRYPTED_VALUE,
	// SUBAGENT_*, and types this package does not know: kept as sent.
	return keep(u.Type, data), nil
}

// MaxKept is the size over which an event kept whole (as custom
// "ag-ui.<TYPE>") loses its rawEvent, and a RAW event is dropped: they
// repeat, for debugging, what the framework did (LangGraph's hold its
// whole state), and one that does not fit in an event would end the run.
const MaxKept = 256 << 10

// keep returns the custom event that keeps an upstream event whole.
func keep(typ string, data []byte) []*tether.Event {
	if len(data) > MaxKept {
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) == nil {
			delete(m, "rawEvent")
			if b, err := json.Marshal(m); err == nil {
				data = b
			}
		}
		if len(data) > MaxKept && typ == "RAW" {
			return nil
		}
	}
	return []*tether.Event{{Type: tether.EventCustom, Name: "ag-ui." + typ, Data: json.RawMessage(bytes.Clone(data))}}
}

// known lists the AG-UI types the mapping reads fields of.
var known = map[string]bool{
	"RUN_STARTED": true, "RUN_FINISHED": true, "RUN_ERROR": true,
	"TEXT_MESSAGE_START": true, "TEXT_MESSAGE_CONTENT": true, "TEXT_MESSAGE_END": true, "TEXT_MESSAGE_CHUNK": true,
	"REASONING_MESSAGE_START": true, "REASONING_MESSAGE_CONTENT": true, "REASONING_MESSAGE_END": true,
	"REASONING_MESSAGE_CHUNK": true, "THINKING_TEXT_MESSAGE_START": true, "THINKING_TEXT_MESSAGE_CONTENT": true,
	"THINKING_TEXT_MESSAGE_END": true, "TOOL_CALL_START": true, "TOOL_CALL_ARGS": true, "TOOL_CALL_END": true,
	"TOOL_CALL_CHUNK": true, "TOOL_CALL_RESULT": true, "CUSTOM": true,
}

// deltaOf reads a string delta: an error if absent or not a string.
func deltaOf(raw json.RawMessage, typ string) (string, error) {
	if len(raw) == 0 {
		return "", malformed("%s without a delta", typ)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", malformed("%s with a delta that is not a string", typ)
	}
	return s, nil
}

// printable cuts an upstream type short for messages.
func printable(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

func nullIfAbsent(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return json.RawMessage("null")
	}
	return v
}

// newID makes an id unique in the run: the run's id, a kind letter, a
// counter.
func (m *Mapper) newID(kind string) string {
	m.seq++
	return m.opts.RunID + "-" + kind + strconv.Itoa(m.seq)
}

// tetherID is the Tether id of a new message the upstream names up: up
// itself if it is a valid id used nowhere else, else a new one.
func (m *Mapper) tetherID(up string) string {
	if tether.ValidID(up) && !m.opts.Taken(up) && m.msgs[up] == nil {
		return up
	}
	return m.newID("m")
}

func role(r string, reasoning bool) (tether.Role, error) {
	switch {
	case reasoning, r == "", r == "assistant":
		return tether.RoleAssistant, nil
	case r == "user":
		return tether.RoleUser, nil
	case r == "system", r == "developer":
		return tether.RoleSystem, nil
	case r == "tool":
		return tether.RoleTool, nil
	}
	return "", malformed("a message with role %q", printable(r))
}

// start starts a text or reasoning message, or continues a message of
// the run that is still open (AG-UI sends the parent of a tool call, or
// the next reasoning segment, under the same id).
func (m *Mapper) start(id *string, r, typ string, reasoning bool) ([]*tether.Event, error) {
	if id == nil || *id == "" {
		return nil, malformed("%s without a messageId", typ)
	}
	if tid, ok := m.ids[*id]; ok {
		if msg := m.msgs[tid]; !msg.done {
			msg.ended = false
			return nil, nil
		}
	}
	rl, err := role(r, reasoning)
	if err != nil {
		return nil, err
	}
	evs := m.settle()
	msg := &message{id: m.tetherID(*id), role: rl}
	m.ids[*id] = msg.id
	m.msgs[msg.id] = msg
	m.order = append(m.order, msg)
	m.open = append(m.open, msg)
	return append(evs, &tether.Event{Type: tether.EventMessageStarted, MessageID: msg.id, Role: rl}), nil
}

// settle finishes the messages whose AG-UI message ended and whose tool
// calls all have results: nothing more can be added to them. Others stay
// open for the tool calls AG-UI may still attach to them, and end with
// the run.
func (m *Mapper) settle() []*tether.Event {
	var evs []*tether.Event
	keep := m.open[:0]
	for _, msg := range m.open {
		open := !msg.ended
		for _, c := range msg.calls {
			open = open || c.result == nil
		}
		if open {
			keep = append(keep, msg)
			continue
		}
		msg.done = true
		evs = append(evs, &tether.Event{Type: tether.EventMessageFinished, MessageID: msg.id, Status: string(tether.MessageDone)})
	}
	clear(m.open[len(keep):])
	m.open = keep
	return evs
}

// openMessage returns the open message an upstream id names.
func (m *Mapper) openMessage(id *string, typ string) (*message, error) {
	if id == nil || *id == "" {
		return nil, malformed("%s without a messageId", typ)
	}
	tid, ok := m.ids[*id]
	if !ok {
		return nil, malformed("%s for a message that was not started", typ)
	}
	msg := m.msgs[tid]
	if msg.done || msg.ended {
		return nil, malformed("%s for a message that ended", typ)
	}
	return msg, nil
}

func (m *Mapper) content(id *string, raw json.RawMessage, typ, evType string) ([]*tether.Event, error) {
	msg, err := m.openMessage(id, typ)
	if err != nil {
		return nil, err
	}
	delta, err := deltaOf(raw, typ)
	if err != nil {
		return nil, err
	}
	if delta == "" {
		return nil, nil
	}
	if evType == tether.EventTextDelta {
		msg.text.WriteString(delta)
	}
	return []*tether.Event{{Type: evType, MessageID: msg.id, Delta: delta}}, nil
}

func (m *Mapper) end(id *string, typ string) ([]*tether.Event, error) {
	msg, err := m.openMessage(id, typ)
	if err != nil {
		return nil, err
	}
	msg.ended = true
	return nil, nil
}

// chunk maps TEXT_MESSAGE_CHUNK and REASONING_MESSAGE_CHUNK: a start the
// first time a messageId is seen, then its delta. A chunk without a
// messageId continues the last one.
func (m *Mapper) chunk(u *upstream, typ, evType string, last *string) ([]*tether.Event, error) {
	id := *last
	if u.MessageID != nil && *u.MessageID != "" {
		id = *u.MessageID
	}
	if id == "" {
		return nil, malformed("%s without a messageId", typ)
	}
	var evs []*tether.Event
	if tid, ok := m.ids[id]; !ok || m.msgs[tid].done || m.msgs[tid].ended {
		var err error
		if evs, err = m.start(&id, u.Role, typ, evType == tether.EventReasoningDelta); err != nil {
			return nil, err
		}
	}
	*last = id
	if len(u.Delta) == 0 {
		return evs, nil
	}
	more, err := m.content(&id, u.Delta, typ, evType)
	return append(evs, more...), err
}

// toolStart starts a tool call in its parent message if that is open,
// else in a new assistant message (named parentMessageId if given).
func (m *Mapper) toolStart(id *string, name, parent, typ string) ([]*tether.Event, error) {
	if id == nil || *id == "" {
		return nil, malformed("%s without a toolCallId", typ)
	}
	if name == "" {
		return nil, malformed("%s without a toolCallName", typ)
	}
	if c := m.calls[*id]; c != nil {
		return nil, malformed("%s for a tool call that was started", typ)
	}
	var evs []*tether.Event
	var msg *message
	if tid, ok := m.ids[parent]; ok && parent != "" && !m.msgs[tid].done {
		msg = m.msgs[tid]
	} else {
		up := parent
		if up == "" || ok {
			up = m.newID("m")
		}
		var err error
		if evs, err = m.start(&up, "", typ, false); err != nil {
			return nil, err
		}
		msg = m.msgs[m.ids[up]]
		msg.ended = true // a message made for its tool calls has no text
	}
	c := &call{id: *id, upstream: *id, name: name, msg: msg}
	if !tether.ValidID(c.id) || callTaken(msg, c.id) {
		c.id = m.newID("c")
	}
	m.calls[*id] = c
	msg.calls = append(msg.calls, c)
	m.lastCall = *id
	return append(evs, &tether.Event{Type: tether.EventToolStarted, MessageID: msg.id, CallID: c.id, Name: name}), nil
}

func callTaken(msg *message, id string) bool {
	for _, c := range msg.calls {
		if c.id == id {
			return true
		}
	}
	return false
}

func (m *Mapper) openCall(id *string, typ string) (*call, error) {
	if id == nil || *id == "" {
		return nil, malformed("%s without a toolCallId", typ)
	}
	c := m.calls[*id]
	if c == nil {
		return nil, malformed("%s for a tool call that was not started", typ)
	}
	if c.result != nil {
		return nil, malformed("%s for a tool call that has its result", typ)
	}
	return c, nil
}

func (m *Mapper) toolArgs(id *string, raw json.RawMessage, typ string) ([]*tether.Event, error) {
	c, err := m.openCall(id, typ)
	if err != nil {
		return nil, err
	}
	delta, err := deltaOf(raw, typ)
	if err != nil {
		return nil, err
	}
	if delta == "" {
		return nil, nil
	}
	c.args.WriteString(delta)
	return []*tether.Event{{Type: tether.EventToolDelta, MessageID: c.msg.id, CallID: c.id, Delta: delta}}, nil
}

// toolChunk maps TOOL_CALL_CHUNK: a start the first time a toolCallId is
// seen, then its delta; a chunk without a toolCallId continues the last.
func (m *Mapper) toolChunk(u *upstream, typ string) ([]*tether.Event, error) {
	id := m.lastCall
	if u.ToolCallID != nil && *u.ToolCallID != "" {
		id = *u.ToolCallID
	}
	if id == "" {
		return nil, malformed("%s without a toolCallId", typ)
	}
	var evs []*tether.Event
	if m.calls[id] == nil {
		var err error
		if evs, err = m.toolStart(&id, u.ToolCallName, u.ParentMessageID, typ); err != nil {
			return nil, err
		}
	}
	m.lastCall = id
	if len(u.Delta) == 0 {
		return evs, nil
	}
	more, err := m.toolArgs(&id, u.Delta, typ)
	return append(evs, more...), err
}

// toolResult maps TOOL_CALL_RESULT: the call's tool.finished, with the
// content as its output (a string). The result of a call this run did not
// start (a frontend tool's, answered in an earlier run) is a complete tool
// message instead, as a tool message in a run's input is.
func (m *Mapper) toolResult(u *upstream, typ string) ([]*tether.Event, error) {
	if u.ToolCallID == nil || *u.ToolCallID == "" {
		return nil, malformed("%s without a toolCallId", typ)
	}
	var content string
	if len(u.Content) == 0 || json.Unmarshal(u.Content, &content) != nil {
		return nil, malformed("%s without a string content", typ)
	}
	out, _ := json.Marshal(content)
	c := m.calls[*u.ToolCallID]
	if c == nil {
		id := ""
		if u.MessageID != nil {
			id = *u.MessageID
		}
		meta, _ := json.Marshal(map[string]string{"tool_call_id": *u.ToolCallID})
		msg := &tether.Message{ID: m.tetherID(id), Role: tether.RoleTool, Metadata: meta,
			Parts: []tether.Part{{Type: tether.PartText, Text: content}}}
		m.msgs[msg.ID] = &message{id: msg.ID, role: tether.RoleTool, done: true}
		if id != "" {
			m.ids[id] = msg.ID
		}
		return []*tether.Event{{Type: tether.EventMessageCreated, MessageID: msg.ID, Message: msg}}, nil
	}
	if c.result != nil {
		return nil, malformed("%s for a tool call that has its result", typ)
	}
	c.result = &content
	return []*tether.Event{{Type: tether.EventToolFinished, MessageID: c.msg.id, CallID: c.id, Output: out}}, nil
}

func (m *Mapper) stateSnapshot(data []byte, typ string) ([]*tether.Event, error) {
	var v struct {
		Snapshot json.RawMessage `json:"snapshot"`
	}
	if err := json.Unmarshal(data, &v); err != nil || v.Snapshot == nil {
		return nil, malformed("%s without a snapshot", typ)
	}
	m.state = v.Snapshot
	if string(v.Snapshot) == "null" {
		m.state = nil
	}
	return []*tether.Event{{Type: tether.EventStateSnapshot, State: v.Snapshot}}, nil
}

func (m *Mapper) stateDelta(data []byte, typ string) ([]*tether.Event, error) {
	var v struct {
		Delta json.RawMessage `json:"delta"`
	}
	if err := json.Unmarshal(data, &v); err != nil || v.Delta == nil {
		return nil, malformed("%s without a delta", typ)
	}
	next, err := runs.ApplyPatch(m.state, v.Delta)
	if err != nil {
		if tether.CodeOf(err) == tether.CodeBadRequest {
			return nil, malformed("%s whose delta is not a JSON Patch", typ)
		}
		return nil, malformed("%s whose delta does not apply to the state", typ)
	}
	m.state = next
	return []*tether.Event{{Type: tether.EventStateDelta, Patch: v.Delta}}, nil
}

// runFinished maps RUN_FINISHED: the run ends done (success or no
// outcome), cancelled, or waits on the interrupts. A result or pending
// frontend tool calls are kept as the custom event ag-ui.RUN_FINISHED
// first.
func (m *Mapper) runFinished(data []byte, u *upstream) ([]*tether.Event, error) {
	var outcome struct {
		Type               string          `json:"type"`
		Interrupts         json.RawMessage `json:"interrupts"`
		PendingToolCallIDs json.RawMessage `json:"pendingToolCallIds"`
	}
	if len(u.Outcome) > 0 && string(u.Outcome) != "null" {
		if err := json.Unmarshal(u.Outcome, &outcome); err != nil {
			return nil, malformed("RUN_FINISHED with an outcome that is not an object")
		}
	}
	m.ended = true
	var evs []*tether.Event
	keep := len(u.Result) > 0 && string(u.Result) != "null" || len(outcome.PendingToolCallIDs) > 0
	if keep {
		evs = append(evs, &tether.Event{Type: tether.EventCustom, Name: "ag-ui.RUN_FINISHED", Data: json.RawMessage(bytes.Clone(data))})
	}
	switch outcome.Type {
	case "", "success":
		evs = append(evs, m.settleAll()...)
		return append(evs, &tether.Event{Type: tether.EventRunFinished, Status: string(tether.RunDone)}), nil
	case "cancelled":
		return append(evs, &tether.Event{Type: tether.EventRunFinished, Status: string(tether.RunCancelled)}), nil
	case "interrupt":
		var list []json.RawMessage
		if err := json.Unmarshal(outcome.Interrupts, &list); err != nil || len(list) == 0 {
			return nil, malformed("RUN_FINISHED with an interrupt outcome without interrupts")
		}
		id := ""
		if len(list) == 1 {
			var one struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(list[0], &one)
			id = one.ID
		}
		if !tether.ValidID(id) {
			id = m.newID("i")
		}
		payload, _ := json.Marshal(map[string]any{"interrupts": json.RawMessage(outcome.Interrupts)})
		m.waiting = &tether.Request{ID: id, Kind: InterruptKind, Payload: payload}
		return evs, nil
	}
	return nil, malformed("RUN_FINISHED with an outcome of type %q", printable(outcome.Type))
}

// settleAll finishes every message of the run still open, done, at the
// end of a run that succeeded: run.finished would too, but the events say
// in which order the messages ended.
func (m *Mapper) settleAll() []*tether.Event {
	for _, msg := range m.open {
		msg.ended = true
	}
	return m.settle() // messages with calls without results: run.finished ends them
}

// InterruptKind is the kind of the request of a run waiting on an AG-UI
// interrupt; its payload is {"interrupts": [...]} as the upstream sent
// them.
const InterruptKind = "ag-ui.interrupt"

// ErrorCode is the code of a run that ended on a RUN_ERROR without a code.
const ErrorCode = "agent_error"

// runError maps RUN_ERROR: the run ends error with its code (ErrorCode if
// it has none) and its message.
func (m *Mapper) runError(u *upstream) []*tether.Event {
	m.ended = true
	code := ErrorCode
	var c string
	if json.Unmarshal(u.Code, &c) == nil && c != "" {
		code = truncate(c, 100)
	}
	msg := strings.TrimSpace(u.Message)
	if msg == "" {
		msg = "The agent reported an error."
	}
	info, _ := json.Marshal(tether.ErrorInfo{Code: code, Message: truncate(msg, 1000)})
	return []*tether.Event{{Type: tether.EventRunFinished, Status: string(tether.RunError), Error: info}}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// Messages returns the messages the run made so far as AG-UI messages,
// for the request that resumes it upstream: each assistant message with
// its text as content and its tool calls, each tool result as a tool
// message after it. Reasoning is left out.
func (m *Mapper) Messages() []map[string]any {
	var out []map[string]any
	for _, msg := range m.order {
		if msg.role != tether.RoleAssistant {
			continue
		}
		var calls []ToolCall
		for _, c := range msg.calls {
			calls = append(calls, ToolCall{ID: c.upstream, Name: c.name, Arguments: c.args.String(), Result: c.result})
		}
		out = append(out, AssistantMessage(msg.id, msg.text.String(), calls)...)
	}
	return out
}

// ToolCall is a tool call of an assistant message, for AssistantMessage.
type ToolCall struct {
	ID, Name string
	// Arguments is the call's input as JSON text.
	Arguments string
	// Result is the call's result, nil if it has none.
	Result *string
}

// AssistantMessage returns an assistant message as AG-UI messages: the
// message with content and toolCalls (nothing if it has neither), then a
// tool message for each call with a result, named as the out projection
// names them (the call's id + ":result").
func AssistantMessage(id, text string, calls []ToolCall) []map[string]any {
	if text == "" && len(calls) == 0 {
		return nil
	}
	msg := map[string]any{"id": id, "role": "assistant", "content": text}
	var out []map[string]any
	if len(calls) > 0 {
		tcs := make([]map[string]any, len(calls))
		for i, c := range calls {
			args := c.Arguments
			if args == "" {
				args = "{}"
			}
			tcs[i] = map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": args}}
		}
		msg["toolCalls"] = tcs
	}
	out = append(out, msg)
	for _, c := range calls {
		if c.Result != nil {
			out = append(out, map[string]any{"id": c.ID + ":result", "role": "tool", "toolCallId": c.ID, "content": *c.Result})
		}
	}
	return out
}
