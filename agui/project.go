package agui

import (
	"encoding/json"
	"slices"
	"strconv"

	tether "github.com/tetherhq/tether"
)

// Options configure a Projector. The zero value projects a whole thread.
type Options struct {
	// Run, if set, projects only this Tether run: events of other runs are
	// ignored, and the join prelude shows this run. Defaults to every run.
	Run string
}

// Projector maps one stream's Tether events to AG-UI frames. It is not
// safe for concurrent use; each stream has its own.
type Projector struct {
	thread string
	opts   Options

	runs map[string]*runState
	msgs map[string]*msgState
	// order is the creation order of the messages in msgs, so that
	// constructs open and close in a stable order.
	order []string
	seg   *segment // the AG-UI run open on the stream, if any
	// held are changes of the thread's state made while no AG-UI run was
	// open (a run that waits may change it): sent in the next one.
	held []Event

	out []Frame // frames of the event being projected
	off tether.Offset
}

// runState is what the projection keeps of an unfinished run.
type runState struct {
	id     string
	aguiID string // the AG-UI runId: metadata.ag_ui.runId, else id
	status tether.RunStatus
	meta   json.RawMessage
	// input is the run's input, collected while it is pending, for its
	// RUN_STARTED.
	input []Event
	req   *tether.Request
}

// msgState is what the projection keeps of a running message.
type msgState struct {
	id      string
	run     string
	role    tether.Role
	nparts  int    // parts so far: the index of the next one
	last    string // type of the last part ("" for none)
	lastIdx int    // index of the last part
	tools   []*toolState
	toolFor string // tool messages: the call they answer (metadata.tool_call_id)
	text    []byte // tool messages: their text, sent whole when they end
	input   bool   // an input message of a pending run
}

// toolState is a tool call of a running message.
type toolState struct {
	id      string
	name    string
	running bool
	hasArgs bool // input_text is not empty
	pending bool // ended with neither output nor error: the front end's to answer
}

// segment is the AG-UI run open on the stream: a Tether run from its start
// or from an answer to its request, until it ends or waits.
type segment struct {
	run    string
	aguiID string
	steps  []string // STEP_STARTED re-emitted and not finished
}

// New returns a projector of thread threadID.
func New(threadID string, opts Options) *Projector {
	return &Projector{thread: threadID, opts: opts, runs: map[string]*runState{}, msgs: map[string]*msgState{}}
}

// Event projects one committed event (its Offset set) and returns the
// frames it makes, possibly none. Events of a run the projector does not
// know are projected as well as they can be; it never fails.
func (p *Projector) Event(e *tether.Event) []Frame {
	if p.opts.Run != "" && e.RunID != p.opts.Run {
		return nil
	}
	p.out, p.off = nil, e.Offset
	switch e.Type {
	case tether.EventRunCreated:
		p.runCreated(e)
	case tether.EventRunStarted:
		p.runStarted(e.RunID)
	case tether.EventRunInput:
		p.runInput(e)
	case tether.EventRunWaiting:
		p.runWaiting(e)
	case tether.EventRunCancelRequested:
		p.inSegment(e.RunID, ev(Custom, "name", "tether.run.cancel_requested", "value", map[string]any{"runId": e.RunID}))
	case tether.EventRunFinished:
		p.runFinished(e)
	case tether.EventMessageStarted:
		p.messageStarted(e)
	case tether.EventTextDelta:
		p.textDelta(e)
	case tether.EventReasoningDelta:
		p.reasoningDelta(e)
	case tether.EventToolStarted:
		p.toolStarted(e)
	case tether.EventToolDelta:
		p.toolDelta(e)
	case tether.EventToolFinished:
		p.toolFinished(e)
	case tether.EventMessageUpdated:
		p.inSegment(e.RunID, ev(Custom, "name", "tether.message.updated",
			"value", map[string]any{"messageId": e.MessageID, "metadata": raw(e.Metadata)}))
	case tether.EventMessageFinished:
		p.messageFinished(e)
	case tether.EventMessageCreated:
		p.messageCreated(e)
	case tether.EventCustom:
		p.custom(e)
	case tether.EventStateSnapshot:
		p.state(e.RunID, ev(StateSnapshot, "snapshot", nullable(e.State)))
	case tether.EventStateDelta:
		p.state(e.RunID, ev(StateDelta, "delta", nullable(e.Patch)))
	default:
		p.other(e)
	}
	return p.flush()
}

// emit queues a frame of the event being projected.
func (p *Projector) emit(run string, e Event) {
	p.out = append(p.out, Frame{Event: e, Offset: p.off, RunID: run})
}

// flush returns the queued frames, the last one marked.
func (p *Projector) flush() []Frame {
	out := p.out
	if n := len(out); n > 0 {
		out[n-1].Last = true
	}
	p.out = nil
	return out
}

// open reports whether the AG-UI run open on the stream is run's.
func (p *Projector) open(run string) bool { return p.seg != nil && p.seg.run == run }

// inSegment emits e if run's AG-UI run is open; events of a run that
// waits, or of one not shown, have no AG-UI run to go in.
func (p *Projector) inSegment(run string, e Event) {
	if p.open(run) {
		p.emit(run, e)
	}
}

func (p *Projector) run(id string) *runState {
	r := p.runs[id]
	if r == nil {
		r = &runState{id: id, aguiID: id, status: tether.RunRunning}
		p.runs[id] = r
	}
	return r
}

func (p *Projector) runCreated(e *tether.Event) {
	r := p.run(e.RunID)
	r.status = tether.RunPending
	if e.Run != nil {
		r.meta = e.Run.Metadata
		r.aguiID = aguiRunID(e.Run)
	}
}

// startSegment opens run r's AG-UI run (RUN_STARTED, with the run's input
// the first time) and reopens every construct the Tether state has open.
func (p *Projector) startSegment(r *runState, withInput bool) {
	p.seg = &segment{run: r.id, aguiID: r.aguiID}
	started := ev(RunStarted, "threadId", p.thread, "runId", r.aguiID)
	if withInput {
		started["input"] = runInput(p.thread, r)
	}
	r.input = nil
	p.emit(r.id, started)
	for _, e := range p.held {
		p.emit(r.id, e)
	}
	p.held = nil
	p.reopen(r.id)
}

// state sends a change of the thread's state (STATE_SNAPSHOT, STATE_DELTA)
// in run's AG-UI run, or holds it for the next one if none is open.
func (p *Projector) state(run string, e Event) {
	switch {
	case p.open(run):
		p.emit(run, e)
	case p.seg == nil:
		p.held = append(p.held, e)
	}
}

// reopen emits the STARTs of what run's running messages have open.
func (p *Projector) reopen(run string) {
	for _, id := range p.order {
		m := p.msgs[id]
		if m.run != run {
			continue
		}
		for _, t := range m.tools {
			if t.running {
				p.emit(run, ev(ToolCallStart, "toolCallId", t.id, "toolCallName", t.name, "parentMessageId", m.id))
			}
		}
		switch m.last {
		case tether.PartText:
			p.startText(m)
		case tether.PartReasoning:
			p.startReasoning(m)
		}
	}
}

// closeAll emits the ENDs of everything open in run's AG-UI run.
func (p *Projector) closeAll(run string) {
	for _, id := range p.order {
		if m := p.msgs[id]; m.run == run {
			p.closePart(m)
			for _, t := range m.tools {
				if t.running {
					p.emit(run, ev(ToolCallEnd, "toolCallId", t.id))
				}
			}
		}
	}
	if p.seg != nil {
		for i := len(p.seg.steps) - 1; i >= 0; i-- {
			p.emit(run, ev(StepFinished, "stepName", p.seg.steps[i]))
		}
		p.seg.steps = nil
	}
}

func (p *Projector) runStarted(id string) {
	r := p.run(id)
	switch r.status {
	case tether.RunPending:
		r.status = tether.RunRunning
	case tether.RunRunning:
		// a reclaim of a running run (a resumed worker): nothing changes
	default:
		return // a reclaim of a waiting run keeps it waiting
	}
	if p.seg == nil {
		p.startSegment(r, true)
	}
}

func (p *Projector) runInput(e *tether.Event) {
	r := p.run(e.RunID)
	r.status, r.req = tether.RunRunning, nil
	if p.seg == nil {
		p.startSegment(r, false)
	}
}

func (p *Projector) runWaiting(e *tether.Event) {
	r := p.run(e.RunID)
	r.status, r.req = tether.RunWaiting, e.Request
	if p.open(r.id) {
		p.closeAll(r.id)
		p.emit(r.id, ev(RunFinished, "threadId", p.thread, "runId", p.seg.aguiID,
			"outcome", map[string]any{"type": "interrupt", "interrupts": interrupts(e.Request)}))
		p.seg = nil
	}
}

func (p *Projector) runFinished(e *tether.Event) {
	r := p.run(e.RunID)
	r.status = tether.RunStatus(e.Status)
	switch {
	case p.open(r.id):
		p.closeAll(r.id)
	case p.seg == nil:
		// It ended without an AG-UI run open (cancelled while pending or
		// waiting, aborted while waiting): show its start and its end.
		p.startSegment(r, r.input != nil)
		p.closeAll(r.id)
	default:
		p.forget(r.id)
		return // another run is shown
	}
	var errInfo *tether.ErrorInfo
	if len(e.Error) > 0 {
		errInfo = new(tether.ErrorInfo)
		_ = json.Unmarshal(e.Error, errInfo)
	}
	p.emit(r.id, finishEvent(p.thread, p.seg.aguiID, r.status, errInfo, p.pendingCalls(r)))
	p.seg = nil
	p.forget(r.id)
}

// forget drops a finished run and its messages: nothing can change them.
func (p *Projector) forget(run string) {
	delete(p.runs, run)
	p.order = slices.DeleteFunc(p.order, func(id string) bool {
		if p.msgs[id].run == run {
			delete(p.msgs, id)
			return true
		}
		return false
	})
}

// pendingCalls returns the run's tool calls that ended without an output
// or error: calls left for the front end to answer (AG-UI's
// pendingToolCallIds).
func (p *Projector) pendingCalls(r *runState) []string {
	var ids []string
	for _, id := range p.order {
		if m := p.msgs[id]; m.run == r.id {
			for _, t := range m.tools {
				// A call still running when its run ends done ends done.
				if t.pending || (t.running && r.status == tether.RunDone) {
					ids = append(ids, t.id)
				}
			}
		}
	}
	return ids
}

func (p *Projector) msg(e *tether.Event) *msgState {
	m := p.msgs[e.MessageID]
	if m == nil {
		m = &msgState{id: e.MessageID, run: e.RunID, role: tether.RoleAssistant}
		p.msgs[m.id] = m
		p.order = append(p.order, m.id)
	}
	return m
}

func (p *Projector) messageStarted(e *tether.Event) {
	m := p.msg(e)
	if e.Role != "" {
		m.role = e.Role
	}
	m.toolFor = toolCallIDOf(e.Metadata)
}

// newPart starts a part of type typ in m, closing the text or reasoning
// message its last part had open.
func (p *Projector) newPart(m *msgState, typ string) {
	p.closePart(m)
	m.last, m.lastIdx = typ, m.nparts
	m.nparts++
}

// closePart emits the END of m's open text or reasoning message.
func (p *Projector) closePart(m *msgState) {
	if !p.open(m.run) {
		return
	}
	switch m.last {
	case tether.PartText:
		if m.role != tether.RoleTool {
			p.emit(m.run, ev(TextMessageEnd, "messageId", m.id))
		}
	case tether.PartReasoning:
		id := reasoningID(m.id, m.lastIdx)
		p.emit(m.run, ev(ReasoningMessageEnd, "messageId", id))
		p.emit(m.run, ev(ReasoningEnd, "messageId", id))
	}
}

func (p *Projector) startText(m *msgState) {
	if m.role != tether.RoleTool && p.open(m.run) {
		p.emit(m.run, ev(TextMessageStart, "messageId", m.id, "role", textRole(m.role)))
	}
}

func (p *Projector) startReasoning(m *msgState) {
	if p.open(m.run) {
		id := reasoningID(m.id, m.lastIdx)
		p.emit(m.run, ev(ReasoningStart, "messageId", id))
		p.emit(m.run, ev(ReasoningMessageStart, "messageId", id, "role", "reasoning"))
	}
}

func (p *Projector) textDelta(e *tether.Event) {
	m := p.msg(e)
	if m.last != tether.PartText {
		p.newPart(m, tether.PartText)
		p.startText(m)
	}
	if m.role == tether.RoleTool {
		m.text = append(m.text, e.Delta...)
		return
	}
	if e.Delta != "" {
		p.inSegment(m.run, ev(TextMessageContent, "messageId", m.id, "delta", e.Delta))
	}
}

func (p *Projector) reasoningDelta(e *tether.Event) {
	m := p.msg(e)
	if m.last != tether.PartReasoning {
		p.newPart(m, tether.PartReasoning)
		p.startReasoning(m)
	}
	if e.Delta != "" {
		p.inSegment(m.run, ev(ReasoningMessageContent, "messageId", reasoningID(m.id, m.lastIdx), "delta", e.Delta))
	}
}

func (m *msgState) tool(id string) *toolState {
	for _, t := range m.tools {
		if t.id == id {
			return t
		}
	}
	return nil
}

func (p *Projector) toolStarted(e *tether.Event) {
	m := p.msg(e)
	p.newPart(m, tether.PartTool)
	t := &toolState{id: e.CallID, name: e.Name, running: true}
	m.tools = append(m.tools, t)
	p.inSegment(m.run, ev(ToolCallStart, "toolCallId", t.id, "toolCallName", t.name, "parentMessageId", m.id))
}

// call returns m's tool call id, started now if the stream never saw it.
func (p *Projector) call(m *msgState, id string) *toolState {
	t := m.tool(id)
	if t == nil {
		p.newPart(m, tether.PartTool)
		t = &toolState{id: id, running: true}
		m.tools = append(m.tools, t)
		p.inSegment(m.run, ev(ToolCallStart, "toolCallId", t.id, "toolCallName", t.name, "parentMessageId", m.id))
	}
	return t
}

func (p *Projector) toolDelta(e *tether.Event) {
	m := p.msg(e)
	t := p.call(m, e.CallID)
	if e.Delta != "" {
		t.hasArgs = true
		p.inSegment(m.run, ev(ToolCallArgs, "toolCallId", t.id, "delta", e.Delta))
	}
}

func (p *Projector) toolFinished(e *tether.Event) {
	m := p.msg(e)
	t := p.call(m, e.CallID)
	if !t.hasArgs && len(e.Input) > 0 && string(e.Input) != "null" {
		p.inSegment(m.run, ev(ToolCallArgs, "toolCallId", t.id, "delta", string(e.Input)))
	}
	p.inSegment(m.run, ev(ToolCallEnd, "toolCallId", t.id))
	t.running = false
	if content, ok := resultContent(e.Output, e.Error); ok {
		p.inSegment(m.run, toolResult(t.id, content))
	} else {
		t.pending = true
	}
}

func (p *Projector) messageFinished(e *tether.Event) {
	m := p.msgs[e.MessageID]
	if m == nil {
		return
	}
	p.closePart(m)
	for _, t := range m.tools {
		if t.running {
			p.inSegment(m.run, ev(ToolCallEnd, "toolCallId", t.id))
			// Its call ends done, without output, if the message is done.
			t.running, t.pending = false, e.Status == string(tether.MessageDone)
		}
	}
	if m.role == tether.RoleTool && m.toolFor != "" {
		p.inSegment(m.run, toolResultMessage(m.id, m.toolFor, string(m.text)))
	}
	m.last = ""
	// A message whose calls are pending is kept until its run ends, for
	// pendingToolCallIds.
	if !slices.ContainsFunc(m.tools, func(t *toolState) bool { return t.pending }) {
		p.drop(m.id)
	}
}

func (p *Projector) drop(id string) {
	delete(p.msgs, id)
	p.order = slices.DeleteFunc(p.order, func(x string) bool { return x == id })
}

func (p *Projector) messageCreated(e *tether.Event) {
	if e.Message == nil {
		return
	}
	msg := *e.Message
	if msg.RunID == "" {
		msg.RunID = e.RunID
	}
	if r := p.runs[e.RunID]; r != nil && r.status == tether.RunPending {
		// An input message of a run that has not started: its RUN_STARTED
		// carries it.
		if m, ok := aguiMessages(msg); ok {
			r.input = append(r.input, m...)
		}
		return
	}
	if pending := pendingParts(msg); len(pending) > 0 {
		m := p.msg(&tether.Event{MessageID: msg.ID, RunID: e.RunID})
		m.role, m.tools = msg.Role, pending
	}
	if !p.open(e.RunID) {
		return
	}
	for _, f := range messageEvents(msg) {
		p.emit(e.RunID, f)
	}
}

// reemit lists the AG-UI event types that have no Tether equivalent and
// are sent again as they were received (contract: stored as custom
// "ag-ui.<TYPE>"). Other types stored so would contradict the stream the
// projection builds, and go out as CUSTOM.
var reemit = map[string]bool{
	"RAW": true, "ACTIVITY_SNAPSHOT": true, "ACTIVITY_DELTA": true, "REASONING_ENCRYPTED_VALUE": true,
	MessagesSnapshot: true, StateSnapshot: true, StateDelta: true, StepStarted: true, StepFinished: true,
}

func (p *Projector) custom(e *tether.Event) {
	if !p.open(e.RunID) {
		return
	}
	const prefix = "ag-ui."
	if len(e.Name) > len(prefix) && e.Name[:len(prefix)] == prefix && reemit[e.Name[len(prefix):]] {
		var up Event
		if json.Unmarshal(e.Data, &up) == nil && up != nil && up.Type() == e.Name[len(prefix):] {
			if p.step(up) {
				p.emit(e.RunID, up)
			}
			return
		}
	}
	p.emit(e.RunID, ev(Custom, "name", e.Name, "value", raw(e.Data)))
}

// step tracks re-emitted steps; it reports whether up may be sent (a
// STEP_FINISHED only for a step this stream started).
func (p *Projector) step(up Event) bool {
	name, _ := up["stepName"].(string)
	switch up.Type() {
	case StepStarted:
		if slices.Contains(p.seg.steps, name) {
			return false
		}
		p.seg.steps = append(p.seg.steps, name)
	case StepFinished:
		i := slices.Index(p.seg.steps, name)
		if i < 0 {
			return false
		}
		p.seg.steps = slices.Delete(p.seg.steps, i, i+1)
	}
	return true
}

// other projects event types this package does not know (added to the log
// after it was written) as CUSTOM "tether.<type>" with the event's JSON.
func (p *Projector) other(e *tether.Event) {
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	p.inSegment(e.RunID, ev(Custom, "name", "tether."+e.Type, "value", json.RawMessage(b)))
}

// nullable is a stored JSON value for a field AG-UI requires: null if
// absent.
func nullable(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return json.RawMessage("null")
	}
	return v
}

// reasoningID is the AG-UI id of the reasoning message made of part i of
// Tether message m. ":" is not allowed in Tether ids, so it names nothing
// else.
func reasoningID(m string, i int) string { return m + ":reasoning:" + strconv.Itoa(i) }

// resultID is the AG-UI id of the tool message holding call's result.
func resultID(call string) string { return call + ":result" }

func textRole(r tether.Role) string {
	switch r {
	case tether.RoleUser, tether.RoleSystem:
		return string(r)
	}
	return "assistant"
}

func toolResult(call, content string) Event {
	return ev(ToolCallResult, "messageId", resultID(call), "toolCallId", call, "content", content, "role", "tool")
}

func toolResultMessage(id, call, content string) Event {
	return ev(ToolCallResult, "messageId", id, "toolCallId", call, "content", content, "role", "tool")
}

// resultContent is the content of a tool call's result: its output (a JSON
// string as the string, any other value as its JSON), else its error (the
// same). ok is false if the call has neither.
func resultContent(output, errv json.RawMessage) (string, bool) {
	switch {
	case len(output) > 0:
		return jsonText(output), true
	case len(errv) > 0 && string(errv) != "null":
		return jsonText(errv), true
	}
	return "", false
}

// jsonText is a JSON string's value, or any other JSON value as its text.
func jsonText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}

// toolCallIDOf reads metadata.tool_call_id, the call a tool message answers.
func toolCallIDOf(md json.RawMessage) string {
	var m struct {
		ToolCallID string `json:"tool_call_id"`
	}
	_ = json.Unmarshal(md, &m)
	return m.ToolCallID
}
