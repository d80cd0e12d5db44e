package api_test

import (
	"testing"
	"time"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// TestAISDKRegenerateUnansweredSentAgain: a plain regenerate() of a
// question whose run ended without an answer (keyed by that run, not by
// an answer) sent again while its own run goes on streams that run, before
// and after its answer started, and makes no other.
func TestAISDKRegenerateUnansweredSentAgain(t *testing.T) {
	const chat = "rgu"
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	q := userMsg("u1", "Why?")
	first := v.goDo("POST", chatPath, chatBody(chat, []any{q}, ""))
	run, lease := v.claimExt()
	v.mustDo(200, "POST", "/v1/runs/"+run.ID+"/events", `[{"type":"run.finished","status":"error","error":{"code":"model_down","message":"no answer"}}]`, lease...)
	if r := <-first; r.status != 200 {
		t.Fatalf("the first try: %d %s", r.status, r.body)
	}

	regen := map[string]any{"id": chat, "messages": []any{q}, "trigger": "regenerate-message"}
	regenerated := v.goDo("POST", chatPath, regen)
	testutil.Eventually(t, 10*time.Second, "the regenerate streamed", func() bool { return v.metric("tether_sse_streams") >= 1 })
	againPending := v.streaming(regen, 2)
	run, lease = v.claimExt()
	v.answerExt(run.ID, lease, "a2", false)
	againLater := v.streaming(regen, 3)
	v.finishExt(run.ID, lease, "a2")

	want := uiText(t, <-regenerated)
	if want != "a2: Answer a2" {
		t.Fatalf("the regenerate streamed %q", want)
	}
	if got := uiText(t, <-againPending); got != want {
		t.Fatalf("sent again before its run was claimed: %q, want %q", got, want)
	}
	if got := uiText(t, <-againLater); got != want {
		t.Fatalf("sent again once its answer started: %q, want %q", got, want)
	}
	if n := v.runsCreated(chat); n != 2 {
		t.Fatalf("%d runs, want 2 (the first try and the regenerate)", n)
	}
}
