package mapping

import (
	"encoding/json"
	"strings"

	tether "github.com/tetherhq/tether"
)

// call is a tool call the Mapper started.
type call struct {
	id, upstream string
	name         string
	msg          *message
	args         strings.Builder
	result       *string // set once TOOL_CALL_RESULT came
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
	if !tether.ValidID(c.id) || callTaken(msg, c.id) || m.opts.Taken(c.id) {
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
