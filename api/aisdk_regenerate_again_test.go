package api_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/aisdk"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// useChat's plain regenerate() (no messageId) sent again (its first
// POST's answer lost) while the run it started is still going: that
// run's stream, nothing appended. The request is keyed by the answer it
// replaces, which once its run is made is that run's own answer.

// claimExt claims the next run of agent "ext" as worker w1: the run and
// its lease header.
func (v *env) claimExt() (tether.Run, []string) {
	v.t.Helper()
	var c struct {
		Run   tether.Run
		Lease struct{ Token string }
	}
	v.mustDo(200, "POST", "/v1/workers/claim", `{"worker_id":"w1","agents":["ext"],"wait_ms":5000}`).json(&c)
	return c.Run, []string{"Tether-Lease", c.Lease.Token}
}

// answerExt answers run (its lease) with assistant message msgID; finish
// also ends the message and the run.
func (v *env) answerExt(run string, lease []string, msgID string, finish bool) {
	v.t.Helper()
	evs := []map[string]any{
		{"type": "message.started", "message_id": msgID, "role": "assistant"},
		{"type": "text.delta", "message_id": msgID, "delta": "Answer " + msgID},
	}
	if finish {
		evs = append(evs,
			map[string]any{"type": "message.finished", "message_id": msgID, "status": "done"},
			map[string]any{"type": "run.finished", "status": "done"})
	}
	b, _ := json.Marshal(evs)
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", string(b), lease...)
}

// finishExt ends message msgID of run and the run.
func (v *env) finishExt(run string, lease []string, msgID string) {
	v.t.Helper()
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"message.finished","message_id":"`+msgID+`","status":"done"},{"type":"run.finished","status":"done"}]`, lease...)
}

// streaming sends a chat request in the background and waits until the
// server streams it (open SSE streams reach open), or it was answered
// otherwise (then it fails the test).
func (v *env) streaming(body any, open float64) <-chan *resp {
	v.t.Helper()
	out := v.goDo("POST", chatPath, body)
	var early *resp
	testutil.Eventually(v.t, 10*time.Second, "the request streamed", func() bool {
		select {
		case early = <-out:
			return true
		default:
		}
		return v.metric("tether_sse_streams") >= open
	})
	if early != nil {
		v.t.Fatalf("the request was answered %d %s, want its run's stream", early.status, early.body)
	}
	return out
}

// runsCreated counts the run.created events of chat's log.
func (v *env) runsCreated(chat string) int {
	n := 0
	for _, raw := range v.readLog(chat) {
		var e tether.Event
		if err := json.Unmarshal(raw, &e); err != nil {
			v.t.Fatal(err)
		}
		if e.Type == tether.EventRunCreated {
			n++
		}
	}
	return n
}

// uiText is the text of the message a stream builds.
func uiText(t *testing.T, r *resp) string {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("the stream: %d %s", r.status, r.body)
	}
	frames := parseUI(t, string(r.body))
	if last := frames[len(frames)-1].chunk["type"]; last != "finish" {
		t.Fatalf("the stream ends with %s, want finish", frames[len(frames)-1].raw)
	}
	var m aisdk.UIMessage
	applyUI(t, &m, frames)
	var text []string
	for _, p := range m.Parts {
		if p.Type == "text" {
			text = append(text, p.Text)
		}
	}
	return m.ID + ": " + strings.Join(text, "")
}

// TestAISDKRegenerateSentAgain: sent again before its run is claimed,
// before the run's answer started, and once it has, each streams the run; it was 409
// (run_active). A regenerate that asks another question is still
// refused while the run goes on.
func TestAISDKRegenerateSentAgain(t *testing.T) {
	const chat = "rga"
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	q := userMsg("u1", "Why?")
	first := v.goDo("POST", chatPath, chatBody(chat, []any{q}, ""))
	run, lease := v.claimExt()
	v.answerExt(run.ID, lease, "a1", true)
	if r := <-first; r.status != 200 {
		t.Fatalf("the first answer: %d %s", r.status, r.body)
	}

	regen := map[string]any{"id": chat, "messages": []any{q}, "trigger": "regenerate-message"}
	regenerated := v.goDo("POST", chatPath, regen)
	testutil.Eventually(t, 10*time.Second, "the regenerate streamed", func() bool { return v.metric("tether_sse_streams") >= 1 })
	// Its run not claimed yet (pending).
	againPending := v.streaming(regen, 2)
	run, lease = v.claimExt()
	// Its answer not started yet: the chat shows none for the question.
	again := v.streaming(regen, 3)
	v.answerExt(run.ID, lease, "a2", false)
	// Its answer started: the chat shows it for the question.
	againLater := v.streaming(regen, 4)

	other := map[string]any{"id": chat, "messages": []any{q, userMsg("u3", "And how?")}, "trigger": "regenerate-message"}
	if r := v.do("POST", chatPath, other); r.status != 409 || r.code() != "run_active" {
		t.Fatalf("a regenerate with another question while the run goes on: %d %s, want 409 run_active", r.status, r.body)
	}

	v.finishExt(run.ID, lease, "a2")
	want := uiText(t, <-regenerated)
	if want != "a2: Answer a2" {
		t.Fatalf("the regenerate streamed %q", want)
	}
	if got := uiText(t, <-againPending); got != want {
		t.Fatalf("the regenerate sent again before its run was claimed streamed %q, want %q", got, want)
	}
	if got := uiText(t, <-again); got != want {
		t.Fatalf("the regenerate sent again before its answer started streamed %q, want %q", got, want)
	}
	if got := uiText(t, <-againLater); got != want {
		t.Fatalf("the regenerate sent again once its answer started streamed %q, want %q", got, want)
	}
	if n := v.runsCreated(chat); n != 2 {
		t.Fatalf("%d runs, want 2 (the answer and its regenerate)", n)
	}
	var msgs []aisdk.UIMessage
	v.mustDo(200, "GET", chatPath+"/"+chat+"/messages", nil).json(&msgs)
	if len(msgs) != 2 || msgs[0].ID != "u1" || msgs[1].ID != "a2" {
		t.Fatalf("the chat's messages: %+v", msgs)
	}
}

// TestAISDKRegenerateWhileOtherRunActive: a regenerate while the chat's
// active run is another request's (a message sent) is refused as before,
// and appends nothing, though its messages are those the run answers.
func TestAISDKRegenerateWhileOtherRunActive(t *testing.T) {
	const chat = "rgo"
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	u1, u2 := userMsg("u1", "Why?"), userMsg("u2", "And how?")
	first := v.goDo("POST", chatPath, chatBody(chat, []any{u1}, ""))
	run, lease := v.claimExt()
	v.answerExt(run.ID, lease, "a1", true)
	if r := <-first; r.status != 200 {
		t.Fatalf("the first answer: %d %s", r.status, r.body)
	}
	var msgs []any
	v.mustDo(200, "GET", chatPath+"/"+chat+"/messages", nil).json(&msgs)
	sent := v.goDo("POST", chatPath, chatBody(chat, []any{msgs[0], msgs[1], u2}, ""))
	run, lease = v.claimExt()

	for _, started := range []bool{false, true} {
		if started {
			v.answerExt(run.ID, lease, "a2", false)
		}
		regen := map[string]any{"id": chat, "messages": []any{msgs[0], msgs[1], u2}, "trigger": "regenerate-message"}
		if r := v.do("POST", chatPath, regen); r.status != 409 || r.code() != "run_active" {
			t.Fatalf("answer started %v: a regenerate of u2's answer while the message's run goes on: %d %s, want 409 run_active", started, r.status, r.body)
		}
		// A tab that has not seen u2 regenerates u1's answer.
		stale := map[string]any{"id": chat, "messages": []any{u1}, "trigger": "regenerate-message"}
		if r := v.do("POST", chatPath, stale); r.status != 409 || r.code() != "conflict" {
			t.Fatalf("answer started %v: a regenerate of u1's answer: %d %s, want 409 conflict", started, r.status, r.body)
		}
	}
	if n := v.runsCreated(chat); n != 2 {
		t.Fatalf("%d runs, want 2", n)
	}
	v.finishExt(run.ID, lease, "a2")
	if r := <-sent; r.status != 200 {
		t.Fatalf("the message's answer: %d %s", r.status, r.body)
	}
}

// TestAISDKRegenerateSentAgainWhileAsking: sent again once its run asks
// for input, the regenerate is its first POST's answer again (the run's
// message up to the request, the stream ending there), not the 409 that
// tells of an open question (which a regenerate from the chat as it
// stands still gets).
func TestAISDKRegenerateSentAgainWhileAsking(t *testing.T) {
	const chat = "rgw"
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	q := userMsg("u1", "Why?")
	first := v.goDo("POST", chatPath, chatBody(chat, []any{q}, ""))
	run, lease := v.claimExt()
	v.answerExt(run.ID, lease, "a1", true)
	if r := <-first; r.status != 200 {
		t.Fatalf("the first answer: %d %s", r.status, r.body)
	}
	regen := map[string]any{"id": chat, "messages": []any{q}, "trigger": "regenerate-message"}
	regenerated := v.goDo("POST", chatPath, regen)
	run, lease = v.claimExt()
	v.answerExt(run.ID, lease, "a2", false)
	v.mustDo(200, "POST", "/v1/runs/"+run.ID+"/events", `[{"type":"run.waiting","request":{"id":"q1","kind":"input","payload":{"prompt":"Which?"}}}]`, lease...)
	r := <-regenerated
	if r.status != 200 {
		t.Fatalf("the regenerate: %d %s", r.status, r.body)
	}
	logLen := len(v.readLog(chat))

	again := v.do("POST", chatPath, regen)
	if again.status != 200 {
		t.Fatalf("the regenerate sent again while its run asks: %d %s", again.status, again.body)
	}
	var want, got aisdk.UIMessage
	applyUI(t, &want, parseUI(t, string(r.body)))
	applyUI(t, &got, parseUI(t, string(again.body)))
	w, _ := json.Marshal(want)
	g, _ := json.Marshal(got)
	if string(g) != string(w) {
		t.Fatalf("the regenerate sent again streamed %s, the first time %s", g, w)
	}
	if n := len(v.readLog(chat)); n != logLen {
		t.Fatalf("the regenerate sent again appended %d events", n-logLen)
	}
	// The chat as it stands: its answer (a2) asks; regenerating it waits
	// for that answer.
	if r := v.do("POST", chatPath, map[string]any{"id": chat, "messages": []any{q}, "trigger": "regenerate-message", "messageId": "a2"}); r.status != 409 || !strings.Contains(string(r.body), "waits for the answer") {
		t.Fatalf("a regenerate of a2 while its run asks: %d %s", r.status, r.body)
	}
}

// TestAISDKRegenerateByIDSentAgain: a regenerate that names the answer it
// replaces (messageId) sent again once its run has ended streams that
// run: its key is that answer's whatever the chat holds (what a client
// that must not make the answer twice sends, docs/ai-sdk.md).
func TestAISDKRegenerateByIDSentAgain(t *testing.T) {
	const chat = "rgi"
	v := newEnv(t, api.Options{})
	demo := map[string]any{"demo": map[string]any{"tokens": 3, "delay_ms": 0}}
	q := userMsg("u1", "Why?")
	v.mustDo(200, "POST", chatAPI, chatBody(chat, []any{q}, `{"tokens":3,"delay_ms":0}`))
	var msgs []aisdk.UIMessage
	v.mustDo(200, "GET", chatAPI+"/"+chat+"/messages", nil).json(&msgs)
	regen := map[string]any{"id": chat, "messages": []any{q}, "trigger": "regenerate-message", "messageId": msgs[1].ID, "metadata": demo}
	first := v.mustDo(200, "POST", chatAPI, regen)
	again := v.mustDo(200, "POST", chatAPI, regen)
	if got, want := uiText(t, again), uiText(t, first); got != want || strings.HasPrefix(got, msgs[1].ID) {
		t.Fatalf("the regenerate sent again streamed %q, the first time %q (replacing %s)", got, want, msgs[1].ID)
	}
	if n := v.runsCreated(chat); n != 2 {
		t.Fatalf("%d runs, want 2 (the answer and its regenerate)", n)
	}
}
