package aisdk

import (
	"encoding/json"

	tether "github.com/tetherhq/tether"
)

// The AI SDK's own approval flow for Tether's approval requests: a
// request of kind approval whose payload's call_id names a running tool
// call of the run is asked on the call's part (tool-approval-request),
// not as a part of its own. The approval's id is made of the call's
// (ApprovalID): a rebuild, which knows the call but not the request once
// it was answered, names a denied call's approval as the live stream did.

// ApprovalID is the id of the approval of a tool call: its message's id
// and its call id. The call id alone may repeat in another message of
// the run, and useChat finds an approval's part by its id in the whole
// UI message.
func ApprovalID(messageID, callID string) string { return messageID + ":" + callID }

// gated returns the running call of the run whose approval req asks, nil
// if req is of another kind or names no running call (it is then a
// dynamic tool part, as any request).
func (s *Stream) gated(req *tether.Request) *toolState {
	id := tether.ApprovalCall(req)
	if id == "" {
		return nil
	}
	for _, m := range s.running() {
		if t := m.tools[id]; t != nil && t.running {
			return t
		}
	}
	return nil
}

// askApproval asks for the approval of a running call on its part: the
// input streamed so far made available (useChat updates the part of a
// tool-input-available in the current step only), then the request.
func (s *Stream) askApproval(out []Chunk, t *toolState) []Chunk {
	s.gate = t
	if t.step == s.steps {
		out = append(out, Chunk{Type: ChunkToolInputAvailable, ToolCallID: t.id, ToolName: t.name, Input: streamedInput(t.input)})
	}
	t.approval = true
	return append(out, Chunk{Type: ChunkToolApprovalRequest, ApprovalID: ApprovalID(t.msg, t.id), ToolCallID: t.id})
}

// approvalResponse shows the answer to a call's approval (run.input), as
// agents read it (tether.ReadApproval): the call runs on, or ends denied.
func (s *Stream) approvalResponse(out []Chunk, t *toolState, v json.RawMessage) []Chunk {
	approved, reason := tether.ReadApproval(v)
	return append(out, Chunk{Type: ChunkToolApprovalResponse, ApprovalID: ApprovalID(t.msg, t.id), Approved: approved, Reason: reason})
}

// deny ends a denied call as the AI SDK ends one: its approval, denied
// with the error's message (asked first if the stream did not ask it: a
// rebuild after the answer, or a call an agent denied by itself), then
// tool-output-denied.
func (s *Stream) deny(out []Chunk, t *toolState, reason string) []Chunk {
	if !t.approval {
		t.approval = true
		out = append(out, Chunk{Type: ChunkToolApprovalRequest, ApprovalID: ApprovalID(t.msg, t.id), ToolCallID: t.id})
	}
	return append(out,
		Chunk{Type: ChunkToolApprovalResponse, ApprovalID: ApprovalID(t.msg, t.id), Reason: reason},
		Chunk{Type: ChunkToolOutputDenied, ToolCallID: t.id})
}

// ungate shows the open request as a dynamic tool part once the call
// whose approval it asks has ended (its message ended, or the agent
// finished it while it waited): a rebuild would show it so.
func (s *Stream) ungate(out []Chunk) []Chunk {
	s.gate = nil
	return append(out, s.requestPart(s.req))
}

// requestPart is the dynamic tool part of a request, waiting for its
// output.
func (s *Stream) requestPart(req *tether.Request) Chunk {
	return Chunk{Type: ChunkToolInputAvailable, ToolCallID: req.ID, ToolName: req.Kind, Input: req.Payload, Dynamic: true}
}

// deniedReason reports whether a tool call's error is a denial (code
// "denied") and its message.
func deniedReason(errv json.RawMessage) (string, bool) {
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if len(errv) == 0 || errv[0] != '{' || json.Unmarshal(errv, &e) != nil || e.Code != tether.DeniedCode {
		return "", false
	}
	return e.Message, true
}
