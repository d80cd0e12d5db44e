package mapping

import (
	"encoding/json"
	"strings"

	tether "github.com/tetherhq/tether"
)

// message is a Tether message the Mapper started.
type message struct {
	id    string // Tether id
	role  tether.Role
	ended bool // its AG-UI text or reasoning message ended
	done  bool // message.finished sent
	text  strings.Builder
	calls []*call
}

// role is the Tether role of an AG-UI message role; reasoning is always
// the assistant's.
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

// settleAll finishes every message of the run still open, done, at the
// end of a run that succeeded: run.finished would too, but the events say
// in which order the messages ended.
func (m *Mapper) settleAll() []*tether.Event {
	for _, msg := range m.open {
		msg.ended = true
	}
	return m.settle() // messages with calls without results: run.finished ends them
}
