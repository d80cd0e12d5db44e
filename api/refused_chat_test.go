package api_test

import (
	"strings"
	"testing"

	"github.com/tetherhq/tether/api"
)

// A run request of the AI SDK's chat or of AG-UI that is refused (an
// unknown agent, a message Tether cannot keep, nothing to regenerate or
// answer) writes nothing, as every refused request: the chat's thread,
// created if missing when a run starts, was created before the request
// was checked, so each refused request on a new chat id left an empty
// thread behind, listed with the user's threads.
func TestRefusedChatRequestCreatesNoThread(t *testing.T) {
	v := newEnv(t, api.Options{})
	const user = `[{"id":"u1","role":"user","parts":[{"type":"text","text":"hi"}]}]`
	cases := []struct {
		name, path, body string
		status           int
	}{
		{"AI SDK, unknown agent", "/v1/ai-sdk/nosuch/chat", `{"id":"c1","messages":` + user + `}`, 400},
		{"AI SDK, a file part", "/v1/ai-sdk/demo/chat", `{"id":"c2","messages":[{"id":"u1","role":"user","parts":[{"type":"file","url":"x"}]}]}`, 400},
		{"AI SDK, nothing to regenerate", "/v1/ai-sdk/demo/chat", `{"id":"c3","trigger":"regenerate-message","messages":[]}`, 400},
		{"AI SDK, metadata too large", "/v1/ai-sdk/demo/chat", `{"id":"c4","messages":` + user + `,"metadata":{"x":"` + strings.Repeat("x", 70000) + `"}}`, 400},
		{"AG-UI, unknown agent", "/v1/ag-ui/nosuch", `{"threadId":"g1","runId":"r1","messages":[{"id":"u1","role":"user","content":"hi"}]}`, 400},
		{"AG-UI, unknown role", "/v1/ag-ui/demo", `{"threadId":"g2","runId":"r1","messages":[{"id":"u1","role":"bogus","content":"hi"}]}`, 400},
		{"AG-UI, no run waits", "/v1/ag-ui/demo", `{"threadId":"g3","runId":"r1","messages":[],"resume":[{"interruptId":"x","status":"resolved"}]}`, 409},
	}
	for _, c := range cases {
		if r := v.do("POST", c.path, c.body); r.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, r.status, r.body, c.status)
		}
	}
	for _, id := range []string{"c1", "c2", "c3", "c4", "g1", "g2", "g3"} {
		if r := v.do("GET", "/v1/threads/"+id, nil); r.status != 404 {
			t.Errorf("thread %s after a refused request: %d %s, want 404", id, r.status, r.body)
		}
	}
	// A request that is not refused creates it.
	v.mustDo(200, "POST", "/v1/ai-sdk/demo/chat", `{"id":"c1","messages":`+user+`,"metadata":{"demo":{"tokens":1,"delay_ms":0}}}`)
	v.mustDo(200, "GET", "/v1/threads/c1", nil)
}
