package agui

import (
	"encoding/json"
	"slices"

	tether "github.com/tetherhq/tether"
)

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
