package demo

import (
	"context"
	"encoding/json"
	"strings"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
)

// approve asks for an approval of the demo's tool call (kind "approval",
// as the Python pydantic-ai adapter asks for a tool's), its input already
// streamed, and reports what the answer decided.
func approve(ctx context.Context, s *agents.Session, call string, input []string) (allowed bool, reason string, err error) {
	args := json.RawMessage(strings.Join(input, ""))
	v, err := s.Wait(ctx, tether.RequestApproval, map[string]any{
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

// Approved reads an answer to a request of kind "approval"
// (tether.ReadApproval): only an explicit yes approves: true,
// {"approved": true}, or one of the words yes, y, approve, approved, allow,
// ok, true as the whole answer (so that a person can answer in any text
// box). Anything else denies, with a reason: {"approved": false, "message":
// ...}'s message, a person's own words, or DeniedMessage.
func Approved(v json.RawMessage) (allowed bool, reason string) {
	allowed, reason = tether.ReadApproval(v)
	if !allowed && reason == "" {
		reason = DeniedMessage
	}
	return allowed, reason
}
