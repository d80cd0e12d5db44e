package api_test

import (
	"io"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agui/aguitest"
	"github.com/tetherhq/tether/api"
)

// TestAGUIResultSentBackUnderItsOwnID: an AG-UI agent behind Tether that
// sends MESSAGES_SNAPSHOT (ag-ui-langgraph does, before RUN_FINISHED)
// names a tool's result by its own message id, where Tether's projection
// names it "<call>:result". The front end's messages become that
// snapshot, and HttpAgent sends them all with the next run: the result,
// already in the thread as the call's output, must not become a tool
// message of the next run's input. It did: the thread held the result
// twice, and the agent got it a second time, after the answer that
// followed it (a conversation a model's API refuses).
func TestAGUIResultSentBackUnderItsOwnID(t *testing.T) {
	v := newEnv(t, api.Options{})
	frames, err := v.agui("POST", "/v1/ag-ui/demo", runInput("t1", "run-1", "what is a log?", `{"tokens":3,"delay_ms":0}`)).all()
	if err != io.EOF {
		t.Fatal(err)
	}
	var sent []any
	for _, m := range messages(frames, aguitest.Event{"id": "u-run-1", "role": "user", "content": "what is a log?"}).Msgs {
		if m["role"] == "tool" {
			m["id"] = "lc-tool-message-7" // the agent's id for the result
		}
		sent = append(sent, m)
	}
	if len(sent) != 4 { // user, reasoning, assistant with its call, the call's result
		t.Fatalf("messages %v", sent)
	}
	next := runInput("t1", "run-2", "and now?", `{"tokens":3,"delay_ms":0}`)
	next["messages"] = append(sent, next["messages"].([]any)...)
	if _, err := v.agui("POST", "/v1/ag-ui/demo", next).all(); err != io.EOF {
		t.Fatal(err)
	}
	var run struct{ Run tether.Run }
	v.mustDo(200, "GET", "/v1/runs/"+v.finalAnswer("t1").RunID, nil).json(&run)
	if len(run.Run.Input.Messages) != 1 || run.Run.Input.Messages[0].Content != "and now?" {
		t.Fatalf("second run's input %+v", run.Run.Input.Messages)
	}
}
