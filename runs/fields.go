package runs

import (
	"bytes"
	"encoding/json"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
)

// field is a set of the optional fields of tether.Event, to check in one
// step that an event carries only the fields its type uses.
type field uint32

const (
	fMessageID field = 1 << iota
	fRole
	fMetadata
	fDelta
	fCallID
	fName
	fInput
	fOutput
	fError
	fStatus
	fRequest
	fData
	fRun
	fMessage
	fWorkerID
	fAttempt
	fRequestID
	fValue
	fState
	fPatch
	numFields = iota
)

// fieldNames are the wire names, in the order of the bits above.
var fieldNames = [numFields]string{
	"message_id", "role", "metadata", "delta", "call_id", "name", "input", "output", "error",
	"status", "request", "data", "run", "message", "worker_id", "attempt", "request_id", "value",
	"state", "patch",
}

func fieldsOf(e *tether.Event) field {
	var f field
	set := func(b bool, bit field) {
		if b {
			f |= bit
		}
	}
	set(e.MessageID != "", fMessageID)
	set(e.Role != "", fRole)
	set(len(e.Metadata) > 0, fMetadata)
	set(e.Delta != "", fDelta)
	set(e.CallID != "", fCallID)
	set(e.Name != "", fName)
	set(len(e.Input) > 0, fInput)
	set(len(e.Output) > 0, fOutput)
	set(len(e.Error) > 0, fError)
	set(e.Status != "", fStatus)
	set(e.Request != nil, fRequest)
	set(len(e.Data) > 0, fData)
	set(e.Run != nil, fRun)
	set(e.Message != nil, fMessage)
	set(e.WorkerID != "", fWorkerID)
	set(e.Attempt != 0, fAttempt)
	set(e.RequestID != "", fRequestID)
	set(len(e.Value) > 0, fValue)
	set(len(e.State) > 0, fState)
	set(len(e.Patch) > 0, fPatch)
	return f
}

// allowedFields returns the fields an event type may carry besides type,
// ts, offset and run_id, and false for an unknown type.
func allowedFields(typ string) (field, bool) {
	switch typ {
	case tether.EventRunCreated:
		return fRun, true
	case tether.EventMessageCreated:
		// message_id repeats message.id so that subscriptions can filter
		// on it without decoding the message.
		return fMessage | fMessageID, true
	case tether.EventRunStarted:
		return fWorkerID | fAttempt, true
	case tether.EventMessageStarted:
		return fMessageID | fRole | fMetadata, true
	case tether.EventTextDelta, tether.EventReasoningDelta:
		return fMessageID | fDelta, true
	case tether.EventToolStarted:
		return fMessageID | fCallID | fName, true
	case tether.EventToolDelta:
		return fMessageID | fCallID | fDelta, true
	case tether.EventToolFinished:
		return fMessageID | fCallID | fInput | fOutput | fError, true
	case tether.EventMessageUpdated:
		return fMessageID | fMetadata, true
	case tether.EventMessageFinished:
		return fMessageID | fStatus, true
	case tether.EventRunWaiting:
		return fRequest, true
	case tether.EventRunInput:
		return fRequestID | fValue, true
	case tether.EventCustom:
		return fName | fData, true
	case tether.EventStateSnapshot:
		return fState, true
	case tether.EventStateDelta:
		return fPatch, true
	case tether.EventRunCancelRequested:
		return 0, true
	case tether.EventRunFinished:
		return fStatus | fError, true
	}
	return 0, false
}

// IsEventType reports whether typ is a type of event a log may hold
// (protocol.md §3). The set is closed: what a worker wants to add goes in
// a custom event, under its name.
func IsEventType(typ string) bool {
	_, ok := allowedFields(typ)
	return ok
}

// checkFields rejects an unknown type and any field the type does not use.
func checkFields(e *tether.Event) error {
	if e.Type == "" {
		return badRequest("field %q is required", "type")
	}
	allowed, ok := allowedFields(e.Type)
	if !ok {
		return badRequest("unknown event type %q", clip.String(e.Type, 40))
	}
	if extra := fieldsOf(e) &^ allowed; extra != 0 {
		for i := range numFields {
			if extra&(1<<i) != 0 {
				return notAllowed(fieldNames[i], e.Type)
			}
		}
	}
	return nil
}

// isNull reports whether raw JSON is absent or the literal null, which the
// rules treat alike where a value is optional.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// isObject reports whether raw is a valid JSON object.
func isObject(raw json.RawMessage) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && json.Valid(raw)
}

// checkJSON rejects a raw field that is set but not valid JSON. Events
// decoded from the wire always pass; in-process agents build events in Go
// and could set anything.
func checkJSON(raw json.RawMessage, name, typ string) error {
	if len(raw) > 0 && !json.Valid(raw) {
		return badRequest("field %q of %s is not valid JSON", name, typ)
	}
	return nil
}

// checkObject rejects an optional field that is set to something other
// than a JSON object or null.
func checkObject(raw json.RawMessage, name, typ string) error {
	if isNull(raw) || isObject(raw) {
		return nil
	}
	return badRequest("field %q of %s must be a JSON object", name, typ)
}
