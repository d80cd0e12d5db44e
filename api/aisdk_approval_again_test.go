package api_test

import (
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/aisdk"
	"github.com/tetherhq/tether/api"
)

// TestAISDKApprovalSentAgain: useChat's answer to a call's approval
// (addToolApprovalResponse) sent again, its first POST's answer lost, is
// that answer: 200, the run's stream from the approval on, nothing
// appended, as a request's output sent again is (TestAISDKAnswerSentAgain).
// It was 409: the run no longer waited, and only a dynamic tool part's
// output was read as an answer given before. Another answer is 409.
func TestAISDKApprovalSentAgain(t *testing.T) {
	for _, approved := range []bool{true, false} {
		v := newEnv(t, api.Options{})
		chat := "again"
		_, run := askApproval(t, v, chat)
		var msgs []aisdk.UIMessage
		v.mustDo(200, "GET", chatAPI+"/"+chat+"/messages", nil).json(&msgs)
		held := msgs[len(msgs)-1]
		p := &held.Parts[len(held.Parts)-1]
		p.State = aisdk.StateApprovalResponded
		p.Approval = &aisdk.UIApproval{ID: p.Approval.ID, Approved: &approved, Reason: "Not now."}
		body := map[string]any{"id": chat, "messages": []any{msgs[0], held}, "trigger": "submit-message", "messageId": held.ID}
		first := parseUI(t, string(v.mustDo(200, "POST", chatAPI, body).body))
		v.waitRun(run, tether.RunDone)
		again := v.do("POST", chatAPI, body)
		if again.status != 200 {
			t.Fatalf("approved %v: the approval sent again: %d %s", approved, again.status, again.body)
		}
		frames := parseUI(t, string(again.body))
		if frames[0].raw != first[0].raw || frames[len(frames)-1].chunk["type"] != "finish" {
			t.Fatalf("approved %v: the stream of the approval sent again: %s … %s", approved, frames[0].raw, frames[len(frames)-1].raw)
		}
		if in := v.inputsOf(chat); len(in) != 1 {
			t.Fatalf("approved %v: %d run.input events, want 1", approved, len(in))
		}
		// The other answer to the same approval: 409.
		other := !approved
		p.Approval = &aisdk.UIApproval{ID: p.Approval.ID, Approved: &other}
		if r := v.do("POST", chatAPI, body); r.status != 409 {
			t.Fatalf("approved %v: another answer to the approval: %d %s", approved, r.status, r.body)
		}
	}
}
