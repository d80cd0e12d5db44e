package agui

import (
	"slices"

	tether "github.com/tetherhq/tether"
)

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
