package api_test

import (
	"encoding/json"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
)

// TestAISDKRegenerateConversation: a worker that claims a regenerate's
// run (POST /v1/workers/claim) is given the chat's conversation without
// the answer the run replaces: the question is its last message, as for
// the first answer.
func TestAISDKRegenerateConversation(t *testing.T) {
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	type claim struct {
		Run      tether.Run       `json:"run"`
		Messages []tether.Message `json:"messages"`
		Lease    struct{ Token string }
	}
	answer := func(body map[string]any, msgID string) []string {
		// The stream's headers come with its first chunk: the request
		// waits for the worker.
		streamed := make(chan *resp, 1)
		go func() { streamed <- v.do("POST", "/v1/ai-sdk/ext/chat", body) }()
		var c claim
		v.mustDo(200, "POST", "/v1/workers/claim", `{"worker_id":"w1","agents":["ext"],"wait_ms":5000}`).json(&c)
		evs, _ := json.Marshal([]map[string]any{
			{"type": "message.started", "message_id": msgID, "role": "assistant"},
			{"type": "text.delta", "message_id": msgID, "delta": "Answer " + msgID},
			{"type": "message.finished", "message_id": msgID, "status": "done"},
			{"type": "run.finished", "status": "done"},
		})
		v.mustDo(200, "POST", "/v1/runs/"+c.Run.ID+"/events", string(evs), "Tether-Lease", c.Lease.Token)
		if r := <-streamed; r.status != 200 {
			t.Fatalf("chat: %d %s", r.status, r.body)
		}
		var got []string
		for _, m := range c.Messages {
			got = append(got, m.ID)
		}
		return got
	}
	q := userMsg("u1", "Why?")
	if got := answer(chatBody("rg", []any{q}, ""), "a1"); len(got) != 1 || got[0] != "u1" {
		t.Fatalf("the first answer's conversation: %v", got)
	}
	regen := map[string]any{"id": "rg", "messages": []any{q}, "trigger": "regenerate-message"}
	if got := answer(regen, "a2"); len(got) != 1 || got[0] != "u1" {
		t.Fatalf("the regenerate's conversation: %v, want [u1]", got)
	}
	if got := answer(regen, "a3"); len(got) != 1 || got[0] != "u1" {
		t.Fatalf("the second regenerate's conversation: %v, want [u1]", got)
	}
}
