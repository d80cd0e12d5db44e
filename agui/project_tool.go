package agui

import tether "github.com/tetherhq/tether"

// toolState is a tool call of a running message.
type toolState struct {
	id      string
	name    string
	running bool
	hasArgs bool // input_text is not empty
	pending bool // ended with neither output nor error: the front end's to answer
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
	if args := inputArgs(e.Input); !t.hasArgs && args != "" {
		p.inSegment(m.run, ev(ToolCallArgs, "toolCallId", t.id, "delta", args))
	}
	p.inSegment(m.run, ev(ToolCallEnd, "toolCallId", t.id))
	t.running = false
	if content, ok := resultContent(e.Output, e.Error); ok {
		p.inSegment(m.run, toolResult(t.id, content))
	} else {
		t.pending = true
	}
}
