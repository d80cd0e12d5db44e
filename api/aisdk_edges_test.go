package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/aisdk"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
)

// TestAISDKSlowConsumerIsAborted: a UI message stream whose client falls
// so far behind that the server cuts it mid-answer is aborted, not
// closed cleanly: the AI SDK takes a clean end for the answer's end and
// would keep the partial message as the whole, where an abort is an
// error the client resumes from.
func TestAISDKSlowConsumerIsAborted(t *testing.T) {
	eopts := engine.Options{}
	eopts.Hub.BufferBytes = 256 << 10
	v := newEnvEngine(t, api.Options{}, eopts)
	v.thread("t1")
	run, lease := v.extRun("t1")
	req, _ := http.NewRequest("GET", v.url+"/v1/ai-sdk/ext/chat/t1/stream", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	// Not read: the socket's buffers fill, then the subscription's in the
	// hub, which cuts it.
	v.stream(run, lease, func() bool { return v.e.Hub().Stats().Subscribers == 0 })
	defer v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"run.finished","status":"done"}]`, lease...)
	b, err := io.ReadAll(res.Body)
	if err == nil {
		t.Fatalf("the stream was closed cleanly mid-answer after %d bytes (finish sent: %v), not aborted", len(b), strings.Contains(string(b), `"type":"finish"`))
	}
}

// TestAISDKResumeBeforeRun: a resume of a run from an offset of the chat
// before that run (the last id of the chat's previous answer) sends the
// whole run, as from its start; it answered 200 with nothing (the
// handler panicked on a projection it never made).
func TestAISDKResumeBeforeRun(t *testing.T) {
	v := newEnv(t, api.Options{})
	first := parseUI(t, string(v.mustDo(200, "POST", chatAPI, chatBody("c", []any{userMsg("u1", "one")}, `{"tokens":3,"delay_ms":0}`)).body))
	last := ""
	for _, f := range first {
		if f.id != "" {
			last = f.id
		}
	}
	r := v.mustDo(200, "POST", chatAPI, chatBody("c", []any{userMsg("u1", "one"), userMsg("u2", "two")}, `{"tokens":3,"delay_ms":0}`))
	run := strings.TrimPrefix(r.header.Get("Content-Location"), "/v1/runs/")
	want := parseUI(t, string(r.body))
	got := parseUI(t, string(v.mustDo(200, "GET", chatAPI+"/c/stream?run_id="+run+"&after="+last, nil).body))
	if len(got) != len(want) {
		t.Fatalf("%d frames, want the run's %d", len(got), len(want))
	}
	for i := range want {
		if got[i].raw != want[i].raw {
			t.Fatalf("frame %d: %s, want %s", i, got[i].raw, want[i].raw)
		}
	}
}

// TestAISDKRegenerateMessageIDChecked: a regenerate's messageId is an id
// like any other, and an error about it names it; one over 237 bytes was
// refused for an Idempotency-Key the client never sent.
func TestAISDKRegenerateMessageIDChecked(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.mustDo(200, "POST", chatAPI, chatBody("c", []any{userMsg("u1", "one")}, `{"tokens":3,"delay_ms":0}`))
	for _, id := range []string{strings.Repeat("a", 240), "a b", "../x"} {
		r := v.mustDo(400, "POST", chatAPI, map[string]any{"id": "c", "messages": []any{userMsg("u1", "one")}, "trigger": "regenerate-message", "messageId": id})
		if !strings.Contains(string(r.body), "messageId") || strings.Contains(string(r.body), "Idempotency-Key") {
			t.Fatalf("messageId %.20q: %s", id, r.body)
		}
	}
}

// TestAISDKRegenerateUnanswered: useChat's Retry after a run that ended
// before answering (regenerate() sends the messages up to the question)
// asks the question again and keeps the earlier answers; it was 400
// "nothing to regenerate" on a first question, and on a later one hid
// the previous question's answer. An earlier answer cannot be made again
// (409, nothing written).
func TestAISDKRegenerateUnanswered(t *testing.T) {
	v := newEnv(t, api.Options{})
	regen := func(msgs []any, messageID string) *resp {
		b := map[string]any{"id": "c", "messages": msgs, "trigger": "regenerate-message", "metadata": map[string]any{"demo": map[string]any{"tokens": 3, "delay_ms": 0}}}
		if messageID != "" {
			b["messageId"] = messageID
		}
		return v.do("POST", chatAPI, b)
	}
	ids := func() []string {
		var msgs []aisdk.UIMessage
		v.mustDo(200, "GET", chatAPI+"/c/messages", nil).json(&msgs)
		var out []string
		for _, m := range msgs {
			out = append(out, m.Role)
		}
		return out
	}
	u0 := userMsg("u0", "one")
	v.mustDo(200, "POST", chatAPI, chatBody("c", []any{u0}, `{"tokens":-1}`))
	if r := regen([]any{u0}, ""); r.status != 200 {
		t.Fatalf("regenerate of a first question without answer: %d %s", r.status, r.body)
	}
	u1 := userMsg("u1", "two")
	v.mustDo(200, "POST", chatAPI, chatBody("c", []any{u0, u1}, `{"tokens":-1}`))
	if r := regen([]any{u0, u1}, ""); r.status != 200 {
		t.Fatalf("regenerate of a later question without answer: %d %s", r.status, r.body)
	}
	if got := strings.Join(ids(), " "); got != "user assistant user assistant" {
		t.Fatalf("messages after the retries: %s", got)
	}
	var th tether.Snapshot
	v.mustDo(200, "GET", "/v1/threads/c", nil).json(&th)
	r := regen([]any{u0}, "u0")
	if r.status != 409 || r.code() != "conflict" || !strings.Contains(string(r.body), "last question") {
		t.Fatalf("regenerate of an earlier answer: %d %s", r.status, r.body)
	}
	var after tether.Snapshot
	v.mustDo(200, "GET", "/v1/threads/c", nil).json(&after)
	if after.Offset != th.Offset {
		t.Fatalf("a refused regenerate wrote to the log: %s -> %s", th.Offset, after.Offset)
	}
}

// TestAISDKRefusedChatCreatesNothing: a chat request refused for what it
// says (no messages, a part Tether does not keep, an unknown agent,
// metadata over its limit, nothing to regenerate, a message of no role
// useChat has) leaves no thread behind; each of them used to create the
// chat's thread, empty (or, for the roles, a run that no question was
// the input of).
func TestAISDKRefusedChatCreatesNothing(t *testing.T) {
	v := newEnv(t, api.Options{})
	big := strings.Repeat("x", engine.MaxMetadataBytes)
	for name, c := range map[string]struct{ path, body string }{
		"no messages":   {chatAPI, `{"id":"c1","messages":[]}`},
		"file part":     {chatAPI, `{"id":"c2","messages":[{"id":"u","role":"user","parts":[{"type":"file","url":"x","mediaType":"image/png"}]}]}`},
		"unknown agent": {"/v1/ai-sdk/nobody/chat", `{"id":"c3","messages":[{"id":"u","role":"user","parts":[{"type":"text","text":"x"}]}]}`},
		"big metadata":  {chatAPI, `{"id":"c4","messages":[{"id":"u","role":"user","parts":[{"type":"text","text":"x"}]}],"metadata":{"a":"` + big + `"}}`},
		"big msg meta":  {chatAPI, `{"id":"c5","messages":[{"id":"u","role":"user","metadata":{"a":"` + big + `"},"parts":[{"type":"text","text":"x"}]}]}`},
		"regenerate":    {chatAPI, `{"id":"c6","messages":[],"trigger":"regenerate-message"}`},
		"answer":        {chatAPI, `{"id":"c7","messages":[{"id":"a","role":"assistant","parts":[]}]}`},
		// A message useChat cannot have made was a run with no input,
		// answered as if nothing had been asked.
		"no role":    {chatAPI, `{"id":"c8","messages":[{"id":"u","parts":[{"type":"text","text":"x"}]}]}`},
		"role User":  {chatAPI, `{"id":"c9","messages":[{"id":"u","role":"User","parts":[{"type":"text","text":"x"}]}]}`},
		"role tool":  {chatAPI, `{"id":"c10","messages":[{"id":"u","role":"tool","parts":[{"type":"text","text":"x"}]}]}`},
		"parts text": {chatAPI, `{"id":"c11","messages":[{"id":"u","role":"user","parts":"x"}]}`},
	} {
		r := v.do("POST", c.path, c.body)
		if r.status/100 != 4 {
			t.Errorf("%s: %d %s", name, r.status, r.body)
			continue
		}
		var b struct{ ID string }
		_ = json.Unmarshal([]byte(c.body), &b)
		if got := v.do("GET", "/v1/threads/"+b.ID, nil); got.status != 404 {
			t.Errorf("%s: refused (%d %s), and thread %s was created", name, r.status, r.code(), b.ID)
		}
	}
}

// TestAISDKResumeSinceLoad: ?after=<offset> alone (the Tether-Offset of
// the messages a page loaded) rebuilds the run that appended first since
// that offset, also when it has ended meanwhile; 204 when nothing was
// appended since, or for a chat that does not exist.
func TestAISDKResumeSinceLoad(t *testing.T) {
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	v.thread("c")
	run, lease := v.extRun("c")
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"text.delta","message_id":"a1","delta":"Hel"}]`, lease...)
	loaded := v.mustDo(200, "GET", "/v1/ai-sdk/ext/chat/c/messages", nil).header.Get("Tether-Offset")
	// The run still going, nothing appended since the load (a page that
	// loaded and resumed between two deltas): it is streamed, as without
	// the offset; it was 204, and the page kept the part as the whole.
	live := v.sse("GET", "/v1/ai-sdk/ext/chat/c/stream?after="+loaded, nil)
	if live.res.StatusCode != 200 || live.res.Header.Get("Content-Location") != "/v1/runs/"+run {
		t.Fatalf("the active run since the load: %d %s", live.res.StatusCode, live.res.Header.Get("Content-Location"))
	}
	live.close()
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"text.delta","message_id":"a1","delta":"lo"},{"type":"message.finished","message_id":"a1","status":"done"},{"type":"run.finished","status":"done"}]`, lease...)
	v.mustDo(204, "GET", "/v1/ai-sdk/ext/chat/c/stream", nil) // what useChat asks on its own: the end is lost
	var m aisdk.UIMessage
	applyUI(t, &m, parseUI(t, string(v.mustDo(200, "GET", "/v1/ai-sdk/ext/chat/c/stream?after="+loaded, nil).body)))
	if m.ID != "a1" || len(m.Parts) != 2 || m.Parts[1].Text != "Hello" {
		t.Fatalf("rebuilt since the load: %+v", m)
	}
	end := v.mustDo(200, "GET", "/v1/ai-sdk/ext/chat/c/messages", nil).header.Get("Tether-Offset")
	v.mustDo(204, "GET", "/v1/ai-sdk/ext/chat/c/stream?after="+end, nil)
	v.mustDo(204, "GET", "/v1/ai-sdk/ext/chat/none/stream?after=-1", nil)

	// A page that has sent more since its load (a resume after a drop
	// names the same offset): its latest answer, not the first since.
	var run2 tether.Run
	v.mustDo(201, "POST", "/v1/threads/c/runs", `{"agent":"ext","input":{"messages":[{"role":"user","content":"again"}]}}`).json(&run2)
	var claim struct{ Lease struct{ Token string } }
	v.mustDo(200, "POST", "/v1/workers/claim", `{"worker_id":"w1","agents":["ext"],"wait_ms":1000}`).json(&claim)
	v.mustDo(200, "POST", "/v1/runs/"+run2.ID+"/events", `[{"type":"message.started","message_id":"a2","role":"assistant"},{"type":"text.delta","message_id":"a2","delta":"Two"},{"type":"message.finished","message_id":"a2","status":"done"},{"type":"run.finished","status":"done"}]`, "Tether-Lease", claim.Lease.Token)
	r := v.mustDo(200, "GET", "/v1/ai-sdk/ext/chat/c/stream?after="+loaded, nil)
	if got := r.header.Get("Content-Location"); got != "/v1/runs/"+run2.ID {
		t.Fatalf("since the load, with two runs after it: %s, want the last, %s", got, run2.ID)
	}
}

// TestAISDKEditRefused: useChat's edit of a message the chat holds
// (sendMessage({text, messageId})) is 409 conflict, and nothing is
// written; the edited message was skipped as one the thread holds and
// the request taken for a retry of the first: the old answer came again
// under the edited question.
func TestAISDKEditRefused(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.mustDo(200, "POST", chatAPI, chatBody("c", []any{userMsg("u0", "one")}, `{"tokens":3,"delay_ms":0}`))
	var before tether.Snapshot
	v.mustDo(200, "GET", "/v1/threads/c", nil).json(&before)
	r := v.do("POST", chatAPI, map[string]any{"id": "c", "messages": []any{userMsg("u0", "one, edited")}, "trigger": "submit-message", "messageId": "u0"})
	if r.status != 409 || r.code() != "conflict" || !strings.Contains(string(r.body), "edit") {
		t.Fatalf("an edit: %d %.200s", r.status, r.body)
	}
	var after tether.Snapshot
	v.mustDo(200, "GET", "/v1/threads/c", nil).json(&after)
	if after.Offset != before.Offset {
		t.Fatalf("a refused edit wrote to the log: %s -> %s", before.Offset, after.Offset)
	}
	// The message as it is (sendMessage() again, or a retry): the first
	// run, as before.
	r = v.mustDo(200, "POST", chatAPI, map[string]any{"id": "c", "messages": []any{userMsg("u0", "one")}, "trigger": "submit-message", "messageId": "u0"})
	if got := r.header.Get("Content-Location"); got != "/v1/runs/"+before.Runs[0].ID {
		t.Fatalf("the same message again: %s, want the first run %s", got, before.Runs[0].ID)
	}
}

// TestAISDKMessagesOffsetCrossOrigin: a page of another origin reads the
// Tether-Offset of the chat's messages (what its resume names to be
// brought up to date): it was not among the exposed headers, so the
// browser hid it, and TetherChatTransport.loadMessages resumed as if it
// knew none.
func TestAISDKMessagesOffsetCrossOrigin(t *testing.T) {
	v := newEnv(t, api.Options{CORSOrigins: []string{"https://app.example"}})
	v.mustDo(200, "POST", chatAPI, chatBody("c", []any{userMsg("u0", "one")}, `{"tokens":3,"delay_ms":0}`))
	r := v.mustDo(200, "GET", chatAPI+"/c/messages", nil, "Origin", "https://app.example")
	if r.header.Get("Tether-Offset") == "" {
		t.Fatal("no Tether-Offset")
	}
	exposed := strings.Split(r.header.Get("Access-Control-Expose-Headers"), ", ")
	if !slices.Contains(exposed, "Tether-Offset") {
		t.Fatalf("Tether-Offset is not exposed to the page: %q", exposed)
	}
}

// TestAISDKChatWithoutRunRightCreatesNothing: a user's token that may
// create threads but not start runs is refused a new chat (403) before
// the chat's thread is made; it was made, empty, then refused.
func TestAISDKChatWithoutRunRightCreatesNothing(t *testing.T) {
	var c clock
	v := newTokenEnv(t, &c, api.Options{})
	noRun := bearer(mint(t, nil, userClaims(&c, "carol", map[string]any{"run": false})))
	r := v.do("POST", chatAPI, chatBody("carol-chat", []any{userMsg("u1", "hi")}, ""), noRun...)
	if r.status != 403 || r.code() != "forbidden" {
		t.Fatalf("a chat without the run right: %d %s", r.status, r.body)
	}
	if got := v.do("GET", "/v1/threads/carol-chat", nil, noRun...); got.status != 404 {
		t.Fatalf("refused, and the chat's thread was made: %d %s", got.status, got.body)
	}
}

// TestAISDKNewMessageWhileAsked: a new message sent while the chat's run
// waits for the answer to its request is 409 run_active saying so, and
// what to do; it said only that the thread had an active run, which the
// user, shown a question, does not see.
func TestAISDKNewMessageWhileAsked(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.mustDo(200, "POST", chatAPI, chatBody("c", []any{userMsg("u1", "ask")}, `{"tokens":3,"delay_ms":0,"ask":true}`))
	r := v.do("POST", chatAPI, chatBody("c", []any{userMsg("u1", "ask"), userMsg("u2", "never mind")}, ""))
	if r.status != 409 || r.code() != "run_active" || !strings.Contains(string(r.body), "waits for the answer") {
		t.Fatalf("a new message while the run asks: %d %s", r.status, r.body)
	}
	v.mustDo(202, "POST", chatAPI+"/c/stop", nil)
}

// TestAISDKRegenerateWhileAsked: a regenerate sent while the chat's run
// waits for a tool call's approval is 409 run_active saying so, and what
// to do, as a new message is (TestAISDKNewMessageWhileAsked); it said only
// that the thread had an active run.
func TestAISDKRegenerateWhileAsked(t *testing.T) {
	v := newEnv(t, api.Options{})
	askApproval(t, v, "rg")
	regen := map[string]any{"id": "rg", "messages": []any{userMsg("u1", "search, if I allow it")}, "trigger": "regenerate-message"}
	r := v.do("POST", chatAPI, regen)
	if r.status != 409 || r.code() != "run_active" || !strings.Contains(string(r.body), "waits for the approval") || !strings.Contains(string(r.body), "then regenerate") {
		t.Fatalf("a regenerate while the run asks an approval: %d %s", r.status, r.body)
	}
	v.mustDo(202, "POST", chatAPI+"/rg/stop", nil)
}
