package agui

import (
	"encoding/json"
	"strings"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/agents/agui/mapping"
	proj "github.com/tetherhq/tether/agui"
)

// runOptions is what a run's metadata.ag_ui carries from an AG-UI front
// end (written by POST /v1/ag-ui/{agent}, docs/ag-ui.md): sent upstream
// as they came.
type runOptions struct {
	Tools          json.RawMessage `json:"tools"`
	Context        json.RawMessage `json:"context"`
	ForwardedProps json.RawMessage `json:"forwardedProps"`
	// State is a front end's state kept in the run's metadata by runs
	// created before it became the thread's (engine.RunRequest.State):
	// such a run is still sent it while the thread's state is null.
	State json.RawMessage `json:"state"`
}

func optionsOf(run tether.Run) runOptions {
	var md struct {
		AGUI runOptions `json:"ag_ui"`
	}
	_ = json.Unmarshal(run.Metadata, &md) // a run's metadata is an object; anything else in it is not ours
	return md.AGUI
}

func orDefault(v json.RawMessage, def string) json.RawMessage {
	if len(v) == 0 || string(v) == "null" {
		return json.RawMessage(def)
	}
	return v
}

// input builds the RunAgentInput of a request: the thread's conversation
// as of the claim, then (when resuming) what the run made since, the
// thread's state, and what the front end sent in metadata.ag_ui.
func input(s *agents.Session, m *mapping.Mapper, runID string, resume json.RawMessage) ([]byte, error) {
	o := optionsOf(s.Run)
	state := m.State()
	if state == nil {
		state = o.State
	}
	msgs := messagesOf(s.Messages)
	msgs = append(msgs, m.Messages()...)
	body := map[string]any{
		"threadId":        s.Run.ThreadID,
		"runId":           runID,
		"protocolVersion": "1.0",
		"state":           orDefault(state, "{}"),
		"messages":        msgs,
		"tools":           orDefault(o.Tools, "[]"),
		"context":         orDefault(o.Context, "[]"),
		"forwardedProps":  orDefault(o.ForwardedProps, "{}"),
	}
	if resume != nil {
		body["resume"] = resume
	}
	return json.Marshal(body)
}

// messagesOf is the thread's conversation as an AG-UI agent is sent it
// (docs/ag-ui-in.md, "The request"): the projection's rendering of it
// (agui.AgentMessages), which a join's MESSAGES_SNAPSHOT shares.
func messagesOf(msgs []tether.Message) []proj.Event {
	return proj.AgentMessages(msgs)
}

// resumeOf turns the answer to an interrupt (run.input's value) into
// AG-UI's resume[]: the value's resume array as it is ({"resume": [...]},
// what POST /v1/ag-ui/{agent} writes), a bare array likewise, and any
// other value as the payload of a "resolved" entry for each interrupt.
func resumeOf(value json.RawMessage, req *tether.Request) json.RawMessage {
	var wrapped struct {
		Resume json.RawMessage `json:"resume"`
	}
	if json.Unmarshal(value, &wrapped) == nil && isArray(wrapped.Resume) {
		return wrapped.Resume
	}
	if isArray(value) {
		return value
	}
	var payload struct {
		Interrupts []struct {
			ID string `json:"id"`
		} `json:"interrupts"`
	}
	_ = json.Unmarshal(req.Payload, &payload)
	entries := make([]map[string]any, 0, len(payload.Interrupts))
	for _, in := range payload.Interrupts {
		e := map[string]any{"interruptId": in.ID, "status": "resolved"}
		if len(value) > 0 && string(value) != "null" {
			e["payload"] = value
		}
		entries = append(entries, e)
	}
	b, _ := json.Marshal(entries)
	return b
}

func isArray(v json.RawMessage) bool {
	t := strings.TrimLeft(string(v), " \t\r\n")
	return strings.HasPrefix(t, "[") && json.Valid(v)
}
