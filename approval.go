package tether

import (
	"encoding/json"
	"strings"
)

// RequestApproval is the kind of a request that asks whether a tool call
// may run. Its payload names the call it gates:
// {"prompt", "tool", "args", "call_id"}; a denied call ends with
// tool.finished error {"code": "denied", "message"}.
const RequestApproval = "approval"

// DeniedCode is the code of a tool call's error (tool.finished's
// error.code, not an API error code) when its approval was denied.
const DeniedCode = "denied"

// ApprovalPayload is what a request of kind approval says of the call it
// gates.
type ApprovalPayload struct {
	Prompt string          `json:"prompt,omitempty"`
	Tool   string          `json:"tool,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"`
	CallID string          `json:"call_id,omitempty"`
}

// ApprovalCall returns the call id an approval request's payload names, or
// "" if it names none (or the request is of another kind).
func ApprovalCall(req *Request) string {
	if req == nil || req.Kind != RequestApproval {
		return ""
	}
	var p ApprovalPayload
	if json.Unmarshal(req.Payload, &p) != nil {
		return ""
	}
	return p.CallID
}

// approvalWords approve when they are the whole answer, in any case.
var approvalWords = map[string]bool{"yes": true, "y": true, "approve": true, "approved": true, "allow": true, "ok": true, "true": true}

// denialWords deny without a reason of their own.
var denialWords = map[string]bool{"no": true, "n": true, "deny": true, "denied": true, "reject": true, "false": true}

// ReadApproval reads an answer to a request of kind approval, as the
// agents that ask one do (the demo agent, the Python pydantic-ai adapter).
// Only an explicit yes approves: true, {"approved": true}, or one of the
// words yes, y, approve, approved, allow, ok, true as the whole answer (so
// that a person can answer in any text box). Anything else denies; reason
// is the denial's own: {"approved": false, "message": ...}'s message, or a
// person's words, else "".
func ReadApproval(v json.RawMessage) (approved bool, reason string) {
	var b bool
	if json.Unmarshal(v, &b) == nil {
		return b, ""
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		w := strings.TrimSpace(s)
		switch {
		case approvalWords[strings.ToLower(w)]:
			return true, ""
		case denialWords[strings.ToLower(w)]:
			return false, ""
		}
		return false, w
	}
	var m struct {
		Approved json.RawMessage `json:"approved"`
		Message  json.RawMessage `json:"message"`
	}
	if json.Unmarshal(v, &m) == nil {
		if string(m.Approved) == "true" {
			return true, ""
		}
		if json.Unmarshal(m.Message, &s) == nil && strings.TrimSpace(s) != "" {
			return false, s
		}
	}
	return false, ""
}
