package demo

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/tetherhq/tether/agents"
)

// approve asks for an approval of the demo's tool call (kind "approval",
// as the Python pydantic-ai adapter asks for a tool's), its input already
// streamed, and reports what the answer decided.
func approve(ctx context.Context, s *agents.Session, call string, input []string) (allowed bool, reason string, err error) {
	args := json.RawMessage(strings.Join(input, ""))
	v, err := s.Wait(ctx, "approval", map[string]any{
		"prompt":  "Allow search(" + string(args) + ")?",
		"tool":    "search",
		"args":    args,
		"call_id": call,
	})
	if err != nil {
		return false, "", err
	}
	allowed, reason = Approved(v)
	return allowed, reason, nil
}

// DeniedMessage is what a denied call's error says when the answer gave no
// reason (pydantic-ai's words).
const DeniedMessage = "The tool call was denied."

// approvalWords approve when they are the whole answer, in any case.
var approvalWords = map[string]bool{"yes": true, "y": true, "approve": true, "approved": true, "allow": true, "ok": true, "true": true}

// denialWords deny without a reason of their own.
var denialWords = map[string]bool{"no": true, "n": true, "deny": true, "denied": true, "reject": true, "false": true}

// Approved reads an answer to a request of kind "approval". Only an
// explicit yes approves: true, {"approved": true}, or one of the words
// yes, y, approve, approved, allow, ok, true as the whole answer (so that a
// person can answer in any text box). Anything else denies, with a reason:
// {"approved": false, "message": ...}'s message, a person's own words, or
// DeniedMessage.
func Approved(v json.RawMessage) (allowed bool, reason string) {
	var b bool
	if json.Unmarshal(v, &b) == nil {
		if b {
			return true, ""
		}
		return false, DeniedMessage
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		w := strings.TrimSpace(s)
		switch {
		case approvalWords[strings.ToLower(w)]:
			return true, ""
		case w == "" || denialWords[strings.ToLower(w)]:
			return false, DeniedMessage
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
	return false, DeniedMessage
}
