package mapping

import (
	"bytes"
	"encoding/json"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/runs"
)

// stateSnapshot maps STATE_SNAPSHOT: the snapshot becomes the state the
// Mapper follows (nil for null), so that the STATE_DELTA events after it
// apply to it. A snapshot of the state the thread has (the same JSON
// text, once compact) is not stored again: LangGraph sends its whole
// state after every step, changed or not, and each copy would cost the
// log its size. Only the run changes the thread's state while it runs,
// so the state the Mapper follows is the thread's.
func (m *Mapper) stateSnapshot(data []byte, typ string) ([]*tether.Event, error) {
	var v struct {
		Snapshot json.RawMessage `json:"snapshot"`
	}
	if err := json.Unmarshal(data, &v); err != nil || v.Snapshot == nil {
		return nil, malformed("%s without a snapshot", typ)
	}
	var c bytes.Buffer
	_ = json.Compact(&c, v.Snapshot) // valid: it was just decoded
	next := json.RawMessage(c.Bytes())
	if string(next) == "null" {
		next = nil
	}
	same := bytes.Equal(next, m.state)
	m.state, m.base = next, nil
	if same {
		return nil, nil
	}
	return []*tether.Event{{Type: tether.EventStateSnapshot, State: v.Snapshot}}, nil
}

// stateDelta maps STATE_DELTA: its delta is applied to the state the
// Mapper follows, as state.delta applies it to the thread's, so that a
// delta that is not a JSON Patch or does not apply is the upstream's fault
// (malformed) here. The first one on a thread whose state is null applies
// to the state the upstream was sent (Options.Sent), which becomes the
// thread's first.
func (m *Mapper) stateDelta(data []byte, typ string) ([]*tether.Event, error) {
	var v struct {
		Delta json.RawMessage `json:"delta"`
	}
	if err := json.Unmarshal(data, &v); err != nil || v.Delta == nil {
		return nil, malformed("%s without a delta", typ)
	}
	var evs []*tether.Event
	if m.state == nil && m.base != nil {
		m.state = m.base
		evs = append(evs, &tether.Event{Type: tether.EventStateSnapshot, State: m.base})
	}
	m.base = nil
	next, err := runs.ApplyPatch(m.state, v.Delta)
	if err != nil {
		if tether.CodeOf(err) == tether.CodeBadRequest {
			return nil, malformed("%s whose delta is not a JSON Patch", typ)
		}
		return nil, malformed("%s whose delta does not apply to the state", typ)
	}
	m.state = next
	return append(evs, &tether.Event{Type: tether.EventStateDelta, Patch: v.Delta}), nil
}
