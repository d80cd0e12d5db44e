package agui_test

import (
	"context"
	"encoding/json"
	"testing"

	tether "github.com/tetherhq/tether"
	proj "github.com/tetherhq/tether/agui"
)

// What an AG-UI agent is sent and what a front end that joins the thread
// is shown are one conversation: the messages of a request upstream are
// those of the join's MESSAGES_SNAPSHOT as of the request, less the
// reasoning, with content and arguments always set (docs/ag-ui-in.md, "The
// request"). That holds for the thread's log (a new run's request) and for
// the messages the proxy follows itself while a run waits (the request
// that answers an interrupt).
func TestRequestAgreesWithTheJoin(t *testing.T) {
	u := newUpstream(t, replay(t, "pydantic_story", "pydantic_tool", "pydantic_interrupt", "pydantic_resume", "pydantic_story"))
	w := newWorld(t, u.URL)
	w.wait(t, w.start(t, "", "story 5"))
	w.wait(t, w.start(t, "", "weather in Paris"))

	id := w.start(t, "", "delete notes")
	w.waitStatus(t, id, func(s tether.RunStatus) bool { return s == tether.RunWaiting || s.Terminal() })
	waiting := w.thread(t)
	value := json.RawMessage(`{"resume":[{"interruptId":"int-call_delete_1","status":"resolved","payload":{"approved":true}}]}`)
	if _, err := w.e.SubmitInput(context.Background(), id, "int-call_delete_1", value); err != nil {
		t.Fatal(err)
	}
	w.wait(t, id)
	last := w.start(t, "", "another story")
	w.wait(t, last)
	ended := w.thread(t)

	reqs := u.requests()
	if len(reqs) != 5 {
		t.Fatalf("%d requests", len(reqs))
	}
	// The answer to the interrupt: the thread as it waits.
	agree(t, "the request that answers the interrupt", reqs[3]["messages"], joinMessages(t, waiting))
	// The last run's request: the thread as the run was claimed (its own
	// answer not yet made).
	var before []tether.Message
	for _, m := range ended.Messages {
		if m.RunID != last || m.Role == tether.RoleUser {
			before = append(before, m)
		}
	}
	ended.Messages = before
	agree(t, "a new run's request", reqs[4]["messages"], joinMessages(t, ended))
}

// joinMessages is the MESSAGES_SNAPSHOT of the join prelude of snap.
func joinMessages(t *testing.T, snap *tether.Snapshot) []map[string]any {
	t.Helper()
	for _, f := range proj.New(snap.Thread.ID, proj.Options{}).Join(snap) {
		if f.Event.Type() == proj.MessagesSnapshot {
			b, _ := json.Marshal(f.Event["messages"])
			var out []map[string]any
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	t.Fatal("no MESSAGES_SNAPSHOT in the prelude")
	return nil
}

// agree fails unless sent (a request's messages) is shown (a join's
// messages) as an agent reads it: no reasoning, an assistant message
// with content ("" if none) or left out with neither content nor calls,
// arguments "{}" for none, a result without its error flag.
func agree(t *testing.T, what string, sent any, shown []map[string]any) {
	t.Helper()
	var want []map[string]any
	for _, m := range shown {
		switch m["role"] {
		case "reasoning":
			continue
		case "tool":
			delete(m, "error")
		case "assistant":
			calls, _ := m["toolCalls"].([]any)
			if _, ok := m["content"]; !ok {
				if len(calls) == 0 {
					continue
				}
				m["content"] = ""
			}
			for _, c := range calls {
				if f := c.(map[string]any)["function"].(map[string]any); f["arguments"] == "" {
					f["arguments"] = "{}"
				}
			}
		}
		want = append(want, m)
	}
	got, _ := json.Marshal(sent)
	exp, _ := json.Marshal(want)
	if string(got) != string(exp) {
		t.Fatalf("%s:\n%s\nthe join shows\n%s", what, got, exp)
	}
	if len(want) < 4 {
		t.Fatalf("%s: only %d messages compared", what, len(want))
	}
}
