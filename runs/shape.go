package runs

import (
	"bytes"
	"encoding/json"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
)

// checkShape applies the rules that need no state: the fields an event must
// and may carry, and their form. Every failure is bad_request.
func (m *Machine) checkShape(e *tether.Event) error {
	if err := checkFields(e); err != nil {
		return err
	}
	if e.RunID == "" {
		return required("run_id", e.Type)
	}
	switch e.Type {
	case tether.EventRunCreated:
		return m.checkNewRun(e)
	case tether.EventMessageCreated:
		return m.checkCreatedMessage(e)
	case tether.EventRunStarted:
		if e.WorkerID == "" {
			return required("worker_id", e.Type)
		}
		if e.Attempt < 0 {
			return badRequest("field %q of %s must be positive", "attempt", e.Type)
		}
	case tether.EventMessageStarted:
		if err := checkID(e.MessageID, "message_id", e.Type); err != nil {
			return err
		}
		if e.Role == "" {
			return required("role", e.Type)
		}
		if !e.Role.Valid() {
			return oneOf("role", e.Type, string(e.Role), roles...)
		}
		return checkObject(e.Metadata, "metadata", e.Type)
	case tether.EventTextDelta, tether.EventReasoningDelta:
		if e.MessageID == "" {
			return required("message_id", e.Type)
		}
	case tether.EventToolStarted:
		if e.MessageID == "" {
			return required("message_id", e.Type)
		}
		if err := checkID(e.CallID, "call_id", e.Type); err != nil {
			return err
		}
		if e.Name == "" {
			return required("name", e.Type)
		}
	case tether.EventToolDelta:
		if e.MessageID == "" {
			return required("message_id", e.Type)
		}
		if e.CallID == "" {
			return required("call_id", e.Type)
		}
	case tether.EventToolFinished:
		if e.MessageID == "" {
			return required("message_id", e.Type)
		}
		if e.CallID == "" {
			return required("call_id", e.Type)
		}
		for _, f := range [...]struct {
			raw  json.RawMessage
			name string
		}{{e.Input, "input"}, {e.Output, "output"}, {e.Error, "error"}} {
			if err := checkJSON(f.raw, f.name, e.Type); err != nil {
				return err
			}
		}
	case tether.EventMessageUpdated:
		if e.MessageID == "" {
			return required("message_id", e.Type)
		}
		if len(e.Metadata) == 0 {
			return required("metadata", e.Type)
		}
		if !isObject(e.Metadata) {
			return badRequest("field %q of %s must be a JSON object", "metadata", e.Type)
		}
	case tether.EventMessageFinished:
		if e.MessageID == "" {
			return required("message_id", e.Type)
		}
		if e.Status == "" {
			return required("status", e.Type)
		}
		if !tether.MessageStatus(e.Status).Terminal() {
			return oneOf("status", e.Type, e.Status, "done", "error", "aborted")
		}
	case tether.EventRunWaiting:
		rq := e.Request
		if rq == nil {
			return required("request", e.Type)
		}
		if err := checkID(rq.ID, "request.id", e.Type); err != nil {
			return err
		}
		if rq.Kind == "" {
			return required("request.kind", e.Type)
		}
		return checkJSON(rq.Payload, "request.payload", e.Type)
	case tether.EventRunInput:
		if err := checkID(e.RequestID, "request_id", e.Type); err != nil {
			return err
		}
		return checkJSON(e.Value, "value", e.Type)
	case tether.EventCustom:
		if e.Name == "" {
			return required("name", e.Type)
		}
		return checkJSON(e.Data, "data", e.Type)
	case tether.EventStateSnapshot:
		if len(e.State) == 0 {
			return required("state", e.Type)
		}
		return checkJSON(e.State, "state", e.Type)
	case tether.EventStateDelta:
		if len(e.Patch) == 0 {
			return required("patch", e.Type)
		}
		if _, err := parsePatch(e.Patch); err != nil {
			return badRequest("field %q of %s is not a JSON Patch (RFC 6902): %v", "patch", e.Type, err)
		}
	case tether.EventRunFinished:
		if e.Status == "" {
			return required("status", e.Type)
		}
		if !tether.RunStatus(e.Status).Terminal() {
			return oneOf("status", e.Type, e.Status, "done", "error", "cancelled", "aborted")
		}
		_, err := runError(e.Error)
		return err
	}
	return nil
}

var roles = []string{"user", "assistant", "tool", "system"}

func checkID(id, name, typ string) error {
	if id == "" {
		return required(name, typ)
	}
	if !tether.ValidID(id) {
		return invalidID(name, id)
	}
	return nil
}

// runError decodes the error of run.finished: absent, null, or exactly
// {code, message} with both set, so that a run's error is always something
// a client can show.
func runError(raw json.RawMessage) (*tether.ErrorInfo, error) {
	if isNull(raw) {
		return nil, nil
	}
	bad := badRequest("field %q of run.finished must be an object {code, message} with non-empty strings", "error")
	if !isObject(raw) {
		return nil, bad
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var info tether.ErrorInfo
	if err := dec.Decode(&info); err != nil || info.Code == "" || info.Message == "" {
		return nil, bad
	}
	return &info, nil
}

func (m *Machine) checkNewRun(e *tether.Event) error {
	r := e.Run
	if r == nil {
		return required("run", e.Type)
	}
	if err := checkID(r.ID, "run.id", e.Type); err != nil {
		return err
	}
	if e.RunID != r.ID {
		return badRequest("run_id %s of run.created differs from run.id %s", q(e.RunID), r.ID)
	}
	if r.ThreadID != m.threadID {
		return badRequest("run %s names thread %s, not %s", r.ID, q(r.ThreadID), m.threadID)
	}
	if r.Status != tether.RunPending {
		return badRequest("run %s must be created pending, not %s", r.ID, q(string(r.Status)))
	}
	// A new run has not started: what only later events may set must be
	// empty, or the fold would depend on values no event explains.
	switch {
	case r.Attempt != 0:
		return notAllowed("run.attempt", e.Type)
	case !r.StartedAt.IsZero():
		return notAllowed("run.started_at", e.Type)
	case !r.CompletedAt.IsZero():
		return notAllowed("run.completed_at", e.Type)
	case !r.CancelRequestedAt.IsZero():
		return notAllowed("run.cancel_requested_at", e.Type)
	case r.Error != nil:
		return notAllowed("run.error", e.Type)
	case r.Request != nil:
		return notAllowed("run.request", e.Type)
	case r.WorkerID != "":
		return notAllowed("run.worker_id", e.Type)
	}
	return checkObject(r.Metadata, "run.metadata", e.Type)
}

func (m *Machine) checkCreatedMessage(e *tether.Event) error {
	msg := e.Message
	if msg == nil {
		return required("message", e.Type)
	}
	if err := checkID(msg.ID, "message.id", e.Type); err != nil {
		return err
	}
	if e.MessageID != "" && e.MessageID != msg.ID {
		return badRequest("message_id %s of %s is not message.id %s", q(e.MessageID), e.Type, q(msg.ID))
	}
	if msg.Role == "" {
		return required("message.role", e.Type)
	}
	if !msg.Role.Valid() {
		return oneOf("message.role", e.Type, string(msg.Role), roles...)
	}
	if msg.ThreadID != "" && msg.ThreadID != m.threadID {
		return badRequest("message %s names thread %s, not %s", msg.ID, q(msg.ThreadID), m.threadID)
	}
	if msg.RunID != "" && msg.RunID != e.RunID {
		return badRequest("message %s names run %s, not %s", msg.ID, q(msg.RunID), q(e.RunID))
	}
	if msg.Status != "" && !msg.Status.Terminal() {
		return oneOf("message.status", e.Type, string(msg.Status), "done", "error", "aborted")
	}
	if err := checkObject(msg.Metadata, "message.metadata", e.Type); err != nil {
		return err
	}
	// Call ids seen so far, so that a message of n tool parts is checked
	// in O(n), not O(n²) as comparing each part with those before it did.
	var calls map[string]struct{}
	for i := range msg.Parts {
		if err := checkPart(msg, i); err != nil {
			return err
		}
		if p := &msg.Parts[i]; p.Type == tether.PartTool {
			if _, ok := calls[p.CallID]; ok {
				return badRequest("message %s has two tool parts with call_id %s", msg.ID, p.CallID)
			}
			if calls == nil {
				calls = make(map[string]struct{})
			}
			calls[p.CallID] = struct{}{}
		}
	}
	return nil
}

// checkPart checks part i of a complete message. Fields a part type does
// not use are rejected rather than dropped, as for events.
func checkPart(msg *tether.Message, i int) error {
	p := &msg.Parts[i]
	var extra string
	switch p.Type {
	case tether.PartText, tether.PartReasoning:
		extra = firstSet(p, "call_id", "name", "input", "input_text", "output", "error", "status", "data")
	case tether.PartData:
		extra = firstSet(p, "text", "call_id", "input", "input_text", "output", "error", "status")
		if extra == "" {
			if err := checkJSON(p.Data, "data", "a data part"); err != nil {
				return err
			}
		}
	case tether.PartTool:
		extra = firstSet(p, "text", "input_text", "data")
		if extra != "" {
			break
		}
		if err := checkID(p.CallID, "call_id", "a tool part"); err != nil {
			return err
		}
		if p.Name == "" {
			return required("name", "a tool part")
		}
		switch p.Status {
		case "", tether.ToolDone, tether.ToolError:
		default:
			return oneOf("status", "a tool part of a complete message", p.Status, "done", "error")
		}
		for _, f := range [...]struct {
			raw  json.RawMessage
			name string
		}{{p.Input, "input"}, {p.Output, "output"}, {p.Error, "error"}} {
			if err := checkJSON(f.raw, f.name, "a tool part"); err != nil {
				return err
			}
		}
	case "":
		return badRequest("part %d of message %s has no type", i, msg.ID)
	default:
		return badRequest("part %d of message %s has unknown type %q", i, msg.ID, clip.String(p.Type, 40))
	}
	if extra != "" {
		return badRequest("field %q is not allowed in a %s part", extra, p.Type)
	}
	return nil
}

func firstSet(p *tether.Part, names ...string) string {
	for _, n := range names {
		var set bool
		switch n {
		case "text":
			set = p.Text != ""
		case "call_id":
			set = p.CallID != ""
		case "name":
			set = p.Name != ""
		case "input":
			set = len(p.Input) > 0
		case "input_text":
			set = p.InputText != ""
		case "output":
			set = len(p.Output) > 0
		case "error":
			set = len(p.Error) > 0
		case "status":
			set = p.Status != ""
		case "data":
			set = len(p.Data) > 0
		}
		if set {
			return n
		}
	}
	return ""
}

// createdToolStatus is the status of a tool part of a complete message: as
// given, else error when it carries an error, else done.
func createdToolStatus(p *tether.Part) string {
	if p.Status != "" {
		return p.Status
	}
	if !isNull(p.Error) {
		return tether.ToolError
	}
	return tether.ToolDone
}
