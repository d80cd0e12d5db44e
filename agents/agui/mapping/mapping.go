package mapping

import (
	"bytes"
	"encoding/json"
	"strconv"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
	"github.com/tetherhq/tether/internal/nest"
)

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
	// Values are kept as they came (state, custom values, events kept
	// whole), and the log takes only UTF-8 nested at most nest.Max deep:
	// an event it would refuse is the upstream's fault, said as such.
	if err := nest.Check(data); err != nil {
		return nil, malformed("an event that %v", err)
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
	q := strconv.Quote(clip.String(s, 40))
	return q[1 : len(q)-1]
}

func nullIfAbsent(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return json.RawMessage("null")
	}
	return v
}
