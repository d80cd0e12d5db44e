package api_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
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

// TestAGUIStateSentBack: HttpAgent sends its whole state with every run,
// the state the agent gave the thread. A thread whose state grew past the
// 64 KiB a run's metadata holds (a LangGraph graph's state carries its
// messages) refused every next run of the conversation (400), since the
// request's state was kept in the run's metadata. The thread's own state
// sent back is the thread's, which the agent has: it is not kept again
// (nor in the run's metadata, nor as a new state).
func TestAGUIStateSentBack(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.mustDo(204, "POST", "/v1/workers/claim", `{"worker_id":"w1","agents":["graph"],"wait_ms":0}`)
	state := map[string]any{"doc": strings.Repeat("x", 100<<10), "n": 1}
	run := func(id string, sent any) {
		t.Helper()
		in := runInput("t1", id, "go on", `{}`)
		in["state"] = sent
		a := v.agui("POST", "/v1/ag-ui/graph", in)
		var claim struct {
			Run   tether.Run
			Lease struct{ Token string }
		}
		v.mustDo(200, "POST", "/v1/workers/claim", `{"worker_id":"w1","agents":["graph"],"wait_ms":5000}`).json(&claim)
		b, _ := json.Marshal([]any{map[string]any{"type": "state.snapshot", "state": state}, map[string]any{"type": "run.finished", "status": "done"}})
		v.mustDo(200, "POST", "/v1/runs/"+claim.Run.ID+"/events", string(b), "Tether-Lease", claim.Lease.Token)
		if _, err := a.all(); err != io.EOF {
			t.Fatal(err)
		}
	}
	run("run-1", map[string]any{})
	run("run-2", state)
	var snap tether.Snapshot
	v.mustDo(200, "GET", "/v1/threads/t1", nil).json(&snap)
	if len(snap.Runs) != 2 || snap.Runs[1].Status != tether.RunDone {
		t.Fatalf("runs %+v", snap.Runs)
	}
	// Sent back unchanged, the state was not written again: the log holds
	// the workers' two snapshots only.
	if n := countEvents(t, v, "t1", tether.EventStateSnapshot); n != 2 {
		t.Fatalf("%d state.snapshot events, want the workers' 2", n)
	}
}

// countEvents counts the events of type typ in thread tid's log.
func countEvents(t *testing.T, v *env, tid, typ string) int {
	t.Helper()
	recs, err := v.st.ReadEvents(context.Background(), tid, tether.OffsetStart, 100000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		ev, err := r.Decode()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == typ {
			n++
		}
	}
	return n
}
