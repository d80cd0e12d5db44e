package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/aisdk"
	"github.com/tetherhq/tether/api"
)

const chatAPI = "/v1/ai-sdk/demo/chat"

// uiFrame is one frame of a UI message stream: its id line, if any, and
// its chunk.
type uiFrame struct {
	id    string
	chunk map[string]any
	raw   string
}

// parseUI splits a UI message stream into its frames (":ping" comments
// left out).
func parseUI(t *testing.T, body string) []uiFrame {
	t.Helper()
	var out []uiFrame
	for _, block := range strings.Split(body, "\n\n") {
		if block == "" || strings.HasPrefix(block, ":") {
			continue
		}
		var f uiFrame
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, "id: "):
				f.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				f.raw = strings.TrimPrefix(line, "data: ")
				if err := json.Unmarshal([]byte(f.raw), &f.chunk); err != nil {
					t.Fatalf("frame %q: %v", block, err)
				}
			default:
				t.Fatalf("unexpected line %q", line)
			}
		}
		out = append(out, f)
	}
	return out
}

func userMsg(id, text string) map[string]any {
	return map[string]any{"id": id, "role": "user", "parts": []any{map[string]any{"type": "text", "text": text}}}
}

func chatBody(chat string, msgs []any, demo string) map[string]any {
	b := map[string]any{"id": chat, "messages": msgs, "trigger": "submit-message"}
	if demo != "" {
		b["metadata"] = json.RawMessage(`{"demo":` + demo + `}`)
	}
	return b
}

// applyUI builds the message of a stream's chunks.
func applyUI(t *testing.T, m *aisdk.UIMessage, frames []uiFrame) {
	t.Helper()
	for _, f := range frames {
		var c aisdk.Chunk
		raw := f.chunk
		c.Type, _ = raw["type"].(string)
		c.MessageID, _ = raw["messageId"].(string)
		c.ID, _ = raw["id"].(string)
		c.Delta, _ = raw["delta"].(string)
		if d, ok := raw["inputTextDelta"].(string); ok {
			c.Delta = d
		}
		c.ToolCallID, _ = raw["toolCallId"].(string)
		c.ToolName, _ = raw["toolName"].(string)
		c.ErrorText, _ = raw["errorText"].(string)
		c.Dynamic, _ = raw["dynamic"].(bool)
		c.ApprovalID, _ = raw["approvalId"].(string)
		c.Approved, _ = raw["approved"].(bool)
		c.Reason, _ = raw["reason"].(string)
		c.Transient, _ = raw["transient"].(bool)
		for k, dst := range map[string]*json.RawMessage{"input": &c.Input, "output": &c.Output, "data": &c.Data} {
			if v, ok := raw[k]; ok {
				*dst, _ = json.Marshal(v)
			}
		}
		aisdk.Apply(m, c)
	}
}

// TestAISDKChat: a chat request creates the thread and a run and streams
// its UI message; the thread's messages name the answer with the stream's
// start id; a retry of the request streams the same run again; an idle
// chat's resume is 204.
func TestAISDKChat(t *testing.T) {
	v := newEnv(t, api.Options{})
	body := chatBody("chat1", []any{userMsg("u1", "hello")}, `{"tokens":12,"delay_ms":0}`)
	r := v.mustDo(200, "POST", chatAPI, body)
	if got := r.header.Get("X-Vercel-Ai-Ui-Message-Stream"); got != "v1" {
		t.Errorf("x-vercel-ai-ui-message-stream: %q", got)
	}
	if ct := r.header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content-type %q", ct)
	}
	frames := parseUI(t, string(r.body))
	if frames[0].chunk["type"] != "start" || frames[len(frames)-1].chunk["type"] != "finish" {
		t.Fatalf("stream: %s … %s", frames[0].raw, frames[len(frames)-1].raw)
	}
	var live aisdk.UIMessage
	applyUI(t, &live, frames)

	var msgs []aisdk.UIMessage
	v.mustDo(200, "GET", chatAPI+"/chat1/messages", nil).json(&msgs)
	if len(msgs) != 2 || msgs[0].ID != "u1" || msgs[1].ID != frames[0].chunk["messageId"] {
		t.Fatalf("messages: %+v", msgs)
	}
	a, _ := json.Marshal(msgs[1])
	b, _ := json.Marshal(live)
	if string(a) != string(b) {
		t.Errorf("listed %s\nstreamed %s", a, b)
	}
	var fa tether.FinalAnswer
	v.mustDo(200, "GET", "/v1/threads/chat1/final-answer", nil).json(&fa)
	if text := msgs[1].Parts[len(msgs[1].Parts)-1].Text; text != fa.Content {
		t.Errorf("answer %q, final answer %q", text, fa.Content)
	}

	// The same request again (a retry): the same run, rebuilt.
	again := parseUI(t, string(v.mustDo(200, "POST", chatAPI, body).body))
	var rebuilt aisdk.UIMessage
	applyUI(t, &rebuilt, again)
	c, _ := json.Marshal(rebuilt)
	if string(c) != string(b) {
		t.Errorf("retry %s\nfirst %s", c, b)
	}
	var th tether.Snapshot
	v.mustDo(200, "GET", "/v1/threads/chat1", nil).json(&th)
	if len(th.Runs) != 1 {
		t.Errorf("%d runs after a retry", len(th.Runs))
	}

	v.mustDo(204, "GET", chatAPI+"/chat1/stream", nil)
	v.mustDo(204, "GET", chatAPI+"/nochat/stream", nil)
	v.mustDo(200, "GET", chatAPI+"/nochat/messages", nil)
	v.mustDo(204, "POST", chatAPI+"/chat1/stop", nil)
}

// TestAISDKResumeFromEveryOffset: the stream resumed (?run_id=&after=)
// from the id of any of its frames continues it exactly: the frames
// before the cut and the resumed ones are the uncut stream.
func TestAISDKResumeFromEveryOffset(t *testing.T) {
	v := newEnv(t, api.Options{})
	r := v.mustDo(200, "POST", chatAPI, chatBody("chat2", []any{userMsg("u1", "resume me")}, `{"tokens":10,"delay_ms":0}`))
	run := strings.TrimPrefix(r.header.Get("Content-Location"), "/v1/runs/")
	frames := parseUI(t, string(r.body))
	n := 0
	for i, f := range frames {
		if f.id == "" {
			continue
		}
		n++
		res := v.mustDo(200, "GET", fmt.Sprintf("%s/chat2/stream?run_id=%s&after=%s", chatAPI, run, f.id), nil)
		var got []string
		for _, g := range frames[:i+1] {
			got = append(got, g.raw)
		}
		for _, g := range parseUI(t, string(res.body)) {
			got = append(got, g.raw)
		}
		var want []string
		for _, g := range frames {
			want = append(want, g.raw)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("resumed after frame %d (%s):\n%s\nwant\n%s", i, f.id, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	if n < 10 {
		t.Fatalf("%d frames with an id", n)
	}
	// An offset of no event of this chat: 410, never a partial replay.
	if res := v.mustDo(410, "GET", chatAPI+"/chat2/stream?run_id="+run+"&after=0000000001_0000000000000001", nil); res.code() != "gone" {
		t.Errorf("code %q", res.code())
	}
	// The same without run_id (a page's load, brought up to date): 410.
	v.mustDo(410, "GET", chatAPI+"/chat2/stream?after=0000000001_0000000000000001", nil)
	v.mustDo(400, "GET", chatAPI+"/chat2/stream?after=now", nil)
	v.mustDo(400, "GET", chatAPI+"/chat2/stream?after=-1&run_id="+run, nil)
	v.mustDo(400, "GET", chatAPI+"/chat2/stream?run_id=&after="+frames[len(frames)-1].id, nil)
}

// TestAISDKWaitingAndAnswer: a run that asks for input ends its stream
// with the request as a dynamic tool part; the message useChat sends back
// with the part's output answers it, and the stream goes on.
func TestAISDKWaitingAndAnswer(t *testing.T) {
	v := newEnv(t, api.Options{})
	frames := parseUI(t, string(v.mustDo(200, "POST", chatAPI, chatBody("chat3", []any{userMsg("u1", "ask")}, `{"tokens":6,"delay_ms":0,"ask":true}`)).body))
	last := frames[len(frames)-2].chunk
	if last["type"] != "tool-input-available" || last["dynamic"] != true || frames[len(frames)-1].chunk["finishReason"] != "tool-calls" {
		t.Fatalf("end of stream: %v %v", last, frames[len(frames)-1].raw)
	}
	var msgs []map[string]any
	v.mustDo(200, "GET", chatAPI+"/chat3/messages", nil).json(&msgs)
	answer := msgs[1]
	parts := answer["parts"].([]any)
	req := parts[len(parts)-1].(map[string]any)
	if req["type"] != "dynamic-tool" || req["state"] != "input-available" {
		t.Fatalf("request part %v", req)
	}
	// Unanswered: 400, and nothing happens.
	r := v.do("POST", chatAPI, map[string]any{"id": "chat3", "messages": []any{userMsg("u1", "ask"), answer}})
	if r.status != 400 {
		t.Fatalf("no output: %d %s", r.status, r.body)
	}
	req["state"], req["output"] = "output-available", "durability"
	more := parseUI(t, string(v.mustDo(200, "POST", chatAPI, map[string]any{"id": "chat3", "messages": []any{userMsg("u1", "ask"), answer}, "trigger": "submit-message"}).body))
	if more[0].chunk["type"] != "start" || more[0].chunk["messageId"] != answer["id"] || more[len(more)-1].chunk["type"] != "finish" {
		t.Fatalf("answer's stream: %s … %s", more[0].raw, more[len(more)-1].raw)
	}
	var fa tether.FinalAnswer
	v.mustDo(200, "GET", "/v1/threads/chat3/final-answer", nil).json(&fa)
	if !strings.Contains(fa.Content, "durability") {
		t.Errorf("final answer %q", fa.Content)
	}
}

// TestAISDKStopAndRegenerate: stop cancels the active run, whose stream
// ends with abort; regenerate starts a run whose answer replaces the
// last one in the thread's messages.
func TestAISDKStopAndRegenerate(t *testing.T) {
	v := newEnv(t, api.Options{})
	s := v.sse("POST", chatAPI, chatBody("chat4", []any{userMsg("u1", "long")}, `{"tokens":2000,"delay_ms":5}`))
	if _, err := s.next(); err != nil { // the start
		t.Fatal(err)
	}
	var run tether.Run
	v.mustDo(202, "POST", chatAPI+"/chat4/stop", nil).json(&run)
	v.waitRun(run.ID, tether.RunCancelled)
	var lastData string
	for {
		f, err := s.next()
		if err != nil {
			break
		}
		lastData = f.data
	}
	s.close()
	if !strings.Contains(lastData, `"abort"`) {
		t.Errorf("last chunk %s, want abort", lastData)
	}
	var msgs []aisdk.UIMessage
	v.mustDo(200, "GET", chatAPI+"/chat4/messages", nil).json(&msgs)
	first := msgs[len(msgs)-1].ID
	frames := parseUI(t, string(v.mustDo(200, "POST", chatAPI, map[string]any{"id": "chat4", "messages": []any{userMsg("u1", "long")}, "trigger": "regenerate-message", "metadata": map[string]any{"demo": map[string]any{"tokens": 3, "delay_ms": 0}}}).body))
	v.mustDo(200, "GET", chatAPI+"/chat4/messages", nil).json(&msgs)
	if len(msgs) != 2 || msgs[1].ID == first || msgs[1].ID != frames[0].chunk["messageId"] {
		t.Fatalf("after regenerate: %+v (first answer %s)", msgs, first)
	}
}

// TestAISDKBadRequests: what a chat request gets wrong is a 400 with a
// clear message, and creates nothing.
func TestAISDKBadRequests(t *testing.T) {
	v := newEnv(t, api.Options{})
	for name, body := range map[string]string{
		"not json":      `{`,
		"unknown field": `{"id":"c","messages":[],"model":"x"}`,
		"bad chat id":   `{"id":"a/b","messages":[{"id":"u","role":"user","parts":[]}]}`,
		"no messages":   `{"id":"c","messages":[]}`,
		"bad trigger":   `{"id":"c","messages":[{"id":"u","role":"user","parts":[]}],"trigger":"x"}`,
		"bad msg id":    `{"id":"c","messages":[{"id":"","role":"user","parts":[]}]}`,
		"file part":     `{"id":"c","messages":[{"id":"u","role":"user","parts":[{"type":"file","url":"x","mediaType":"image/png"}]}]}`,
		"metadata":      `{"id":"c","messages":[{"id":"u","role":"user","parts":[]}],"metadata":[1]}`,
	} {
		r := v.do("POST", chatAPI, body)
		if r.status != 400 || r.code() != "bad_request" {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}
	if r := v.do("POST", "/v1/ai-sdk/nobody/chat", chatBody("c2", []any{userMsg("u", "x")}, "")); r.status != 400 {
		t.Errorf("unknown agent: %d %s", r.status, r.body)
	}
}
