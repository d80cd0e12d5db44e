package mapping

import (
	"bytes"
	"encoding/json"
	"strings"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
)

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
		// A run may not ask again under an id it asked before (the
		// worker rules refuse it): an upstream may reuse its own.
		if !tether.ValidID(id) || m.asked[id] {
			id = m.newID("i")
		}
		m.asked[id] = true
		payload, _ := json.Marshal(map[string]any{"interrupts": json.RawMessage(outcome.Interrupts)})
		m.waiting = &tether.Request{ID: id, Kind: InterruptKind, Payload: payload}
		return evs, nil
	}
	return nil, malformed("RUN_FINISHED with an outcome of type %q", printable(outcome.Type))
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
		code = clip.String(c, 100)
	}
	msg := strings.TrimSpace(u.Message)
	if msg == "" {
		msg = "The agent reported an error."
	}
	info, _ := json.Marshal(tether.ErrorInfo{Code: code, Message: clip.String(msg, 1000)})
	return []*tether.Event{{Type: tether.EventRunFinished, Status: string(tether.RunError), Error: info}}
}
