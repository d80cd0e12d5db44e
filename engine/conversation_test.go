package engine_test

import (
	"encoding/json"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
)

// ids returns the ids of messages.
func ids(msgs []tether.Message) []string {
	out := []string{}
	for _, m := range msgs {
		out = append(out, m.ID)
	}
	return out
}

// TestClaimLeavesOutReplacedAnswers: a run that makes an earlier answer
// again (its metadata regenerates it) is given the conversation without
// that answer, nor any answer an earlier run replaced; the thread keeps
// them all. An agent that hands the conversation to a model was asking it
// to follow its own earlier answer, last, instead of answering again.
func TestClaimLeavesOutReplacedAnswers(t *testing.T) {
	e, _ := setup(t)
	mustThread(t, e, "t1")
	regenerates := func(id string) json.RawMessage {
		return json.RawMessage(`{"ai_sdk":{"regenerates":"` + id + `"},"other":1}`)
	}
	mustRun(t, e, "t1", engine.RunRequest{Input: tether.RunInput{Messages: []tether.InputMessage{{ID: "u1", Role: tether.RoleUser, Content: "Why?"}}}})
	c := mustClaim(t, e, "echo")
	mustAppend(t, e, c, append(append(answer("a1", "Because"), answer("a1b", "and so")...), finished(tether.RunDone))...)

	mustRun(t, e, "t1", engine.RunRequest{Metadata: regenerates("a1")})
	c = mustClaim(t, e, "echo")
	if got := ids(c.Messages); len(got) != 1 || got[0] != "u1" {
		t.Fatalf("the regenerate's conversation: %v, want [u1] (the answer it replaces left out)", got)
	}
	mustAppend(t, e, c, append(answer("a2", "Since"), finished(tether.RunDone))...)

	// Again: neither earlier answer.
	mustRun(t, e, "t1", engine.RunRequest{Metadata: regenerates("a2")})
	c = mustClaim(t, e, "echo")
	if got := ids(c.Messages); len(got) != 1 || got[0] != "u1" {
		t.Fatalf("the second regenerate's conversation: %v, want [u1]", got)
	}
	mustAppend(t, e, c, append(answer("a3", "As"), finished(tether.RunDone))...)

	// The next question sees the answer that stands, a3, only.
	mustRun(t, e, "t1", engine.RunRequest{Input: tether.RunInput{Messages: []tether.InputMessage{{ID: "u2", Role: tether.RoleUser, Content: "And?"}}}})
	c = mustClaim(t, e, "echo")
	if got := ids(c.Messages); len(got) != 3 || got[0] != "u1" || got[1] != "a3" || got[2] != "u2" {
		t.Fatalf("the next question's conversation: %v, want [u1 a3 u2]", got)
	}
	snap, err := e.Thread(ctxT(t), "t1")
	if err != nil || len(snap.Messages) != 6 {
		t.Fatalf("the thread keeps every message: %v, %v", ids(snap.Messages), err)
	}
}
