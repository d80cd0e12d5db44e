package agui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	tether "github.com/tetherhq/tether"
	proj "github.com/tetherhq/tether/agui"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/runs"
)

// An upstream's STATE_DELTA applies to the state it was sent: on a thread
// whose state is still null, the front end's (metadata.ag_ui.state), else
// {}. AG-UI agents patch the state of their RunAgentInput; such a delta
// was applied to null instead, refused, and ended the run error.
func TestStateDeltaOnTheStateSent(t *testing.T) {
	u := newUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"type\":\"RUN_STARTED\"}\n\n" +
			"data: {\"type\":\"STATE_DELTA\",\"delta\":[{\"op\":\"add\",\"path\":\"/count\",\"value\":1}]}\n\n" +
			"data: {\"type\":\"RUN_FINISHED\"}\n\n"))
	})
	for _, c := range []struct{ meta, sent, want string }{
		{"", `{}`, `{"count":1}`},
		{`{"ag_ui":{"state":{"page":"home"}}}`, `{"page":"home"}`, `{"page":"home","count":1}`},
	} {
		w := newWorld(t, u.URL)
		snap := w.wait(t, w.start(t, c.meta, "count"))
		if r := snap.Runs[0]; r.Status != tether.RunDone {
			t.Fatalf("metadata %s: run %s %+v", c.meta, r.Status, r.Error)
		}
		if got := string(w.thread(t).State); got != c.want {
			t.Fatalf("metadata %s: state %s, want %s", c.meta, got, c.want)
		}
		if sent, _ := json.Marshal(u.requests()[len(u.requests())-1]["state"]); string(sent) != c.sent {
			t.Fatalf("metadata %s: sent state %s, want %s", c.meta, sent, c.sent)
		}
	}
}

// A state a front end edited between runs (engine.RunRequest.State, what
// POST /v1/ag-ui/{agent} sets from RunAgentInput.state) is the one the
// upstream is sent, and its deltas apply to it: the upstream got the
// state it had left instead.
func TestFrontEndStateSentUpstream(t *testing.T) {
	u := newUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"type\":\"RUN_STARTED\"}\n\n" +
			"data: {\"type\":\"STATE_DELTA\",\"delta\":[{\"op\":\"add\",\"path\":\"/count\",\"value\":1}]}\n\n" +
			"data: {\"type\":\"RUN_FINISHED\"}\n\n"))
	})
	w := newWorld(t, u.URL)
	w.wait(t, w.start(t, "", "count"))
	rc, err := w.e.CreateRun(context.Background(), "t1", engine.RunRequest{Agent: "research", State: json.RawMessage(`{"count":10,"page":"x"}`),
		Input: tether.RunInput{Messages: []tether.InputMessage{{Role: tether.RoleUser, Content: "again"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := w.wait(t, rc.Run.ID).Runs[0]; r.Status != tether.RunDone {
		t.Fatalf("run %s %+v", r.Status, r.Error)
	}
	if sent, _ := json.Marshal(u.requests()[1]["state"]); string(sent) != `{"count":10,"page":"x"}` {
		t.Fatalf("sent state %s", sent)
	}
	if got := string(w.thread(t).State); got != `{"count":1,"page":"x"}` {
		t.Fatalf("state %s", got)
	}
}

// LangGraph sends its whole state after every step, changed or not: a
// snapshot equal to the thread's state is not stored again, in the run or
// in the next one (whose thread has it already), and what a client folds
// from the AG-UI stream of the log is still the thread's state.
func TestSameStateSnapshotNotStored(t *testing.T) {
	u := newUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"type\":\"RUN_STARTED\"}\n\n" +
			"data: {\"type\":\"STATE_SNAPSHOT\",\"snapshot\":{\"steps\":[\"plan\"]}}\n\n" +
			"data: {\"type\":\"STATE_SNAPSHOT\",\"snapshot\":{\"steps\": [\"plan\"]}}\n\n" +
			"data: {\"type\":\"STATE_DELTA\",\"delta\":[{\"op\":\"add\",\"path\":\"/steps/-\",\"value\":\"answer\"}]}\n\n" +
			"data: {\"type\":\"STATE_SNAPSHOT\",\"snapshot\":{\"steps\":[\"plan\",\"answer\"]}}\n\n" +
			"data: {\"type\":\"RUN_FINISHED\"}\n\n"))
	})
	w := newWorld(t, u.URL)
	first := w.start(t, "", "one")
	w.wait(t, first)
	second := w.start(t, "", "two")
	if r := w.wait(t, second).Runs[0]; r.Status != tether.RunDone {
		t.Fatalf("run %s %+v", r.Status, r.Error)
	}
	count := func(run, typ string) int {
		n := 0
		for _, e := range w.log(t, run) {
			if e.Type == typ {
				n++
			}
		}
		return n
	}
	// The second run's first snapshot changes the state back.
	if s, d := count(first, tether.EventStateSnapshot), count(first, tether.EventStateDelta); s != 1 || d != 1 {
		t.Fatalf("first run: %d state.snapshot, %d state.delta; want 1, 1", s, d)
	}
	if s := count(second, tether.EventStateSnapshot); s != 1 {
		t.Fatalf("second run: %d state.snapshot, want 1", s)
	}
	th := w.thread(t)
	if string(th.State) != `{"steps":["plan","answer"]}` {
		t.Fatalf("state %s", th.State)
	}
	// The AG-UI stream of the whole log folds to it.
	p := proj.New("t1", proj.Options{})
	var state json.RawMessage
	for _, e := range append(w.log(t, first), w.log(t, second)...) {
		for _, f := range p.Event(e) {
			switch f.Event.Type() {
			case proj.StateSnapshot:
				state, _ = json.Marshal(f.Event["snapshot"])
			case proj.StateDelta:
				patch, _ := json.Marshal(f.Event["delta"])
				var err error
				if state, err = runs.ApplyPatch(state, patch); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if string(state) != string(th.State) {
		t.Fatalf("the stream folds to %s, the thread has %s", state, th.State)
	}
}
