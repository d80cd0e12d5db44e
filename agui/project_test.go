package agui

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
)

// types is the event types of frames, with the ids that say what they open
// and close, for tables.
func types(frames []Frame) []string {
	out := make([]string, len(frames))
	for i, f := range frames {
		s := f.Event.Type()
		for _, k := range []string{"messageId", "toolCallId", "stepName", "name"} {
			if v, ok := f.Event[k].(string); ok {
				s += " " + v
			}
		}
		if o, ok := f.Event["outcome"].(map[string]any); ok {
			s += " " + o["type"].(string)
		}
		if c, ok := f.Event["code"].(string); ok {
			s += " " + c
		}
		out[i] = s
	}
	return out
}

// demoRun writes what the demo agent writes: reasoning, a streamed tool
// call with its output, then the answer.
func demoRun(l *tlog, ask bool) {
	l.createRun("r1", `{"ag_ui":{"runId":"agui-1"}}`, tether.InputMessage{ID: "u1", Role: tether.RoleUser, Content: "hi"})
	l.started("r1")
	l.msg("r1", "m1")
	l.reasoning("r1", "m1", "Let me ")
	l.reasoning("r1", "m1", "look.")
	l.tool("r1", "m1", "m1-call1", "search", []string{`{"query":`, `"hi"}`}, `{"results":[]}`)
	if ask {
		l.wait("r1", "q1", "input", `{"prompt":"Which detail?"}`)
		l.input("r1", "q1", `"speed"`)
	}
	l.text("r1", "m1", "Here ")
	l.text("r1", "m1", "it is.")
	l.endMsg("r1", "m1")
	l.finish("r1", tether.RunDone, "")
}

func TestProjectDemoRun(t *testing.T) {
	l := newLog(t, "t1")
	demoRun(l, false)
	frames := l.project(Options{}, 0, false)
	want := []string{
		"RUN_STARTED",
		"REASONING_START m1:reasoning:0", "REASONING_MESSAGE_START m1:reasoning:0",
		"REASONING_MESSAGE_CONTENT m1:reasoning:0", "REASONING_MESSAGE_CONTENT m1:reasoning:0",
		"REASONING_MESSAGE_END m1:reasoning:0", "REASONING_END m1:reasoning:0",
		"TOOL_CALL_START m1-call1", "TOOL_CALL_ARGS m1-call1", "TOOL_CALL_ARGS m1-call1",
		"TOOL_CALL_END m1-call1", "TOOL_CALL_RESULT m1-call1:result m1-call1",
		"TEXT_MESSAGE_START m1", "TEXT_MESSAGE_CONTENT m1", "TEXT_MESSAGE_CONTENT m1", "TEXT_MESSAGE_END m1",
		"RUN_FINISHED success",
	}
	if got := types(frames); !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	evs := verify(t, frames)
	if evs[0]["runId"] != "agui-1" || evs[0]["threadId"] != "t1" {
		t.Fatalf("RUN_STARTED %v", evs[0])
	}
	in := evs[0]["input"].(map[string]any)
	if msgs := in["messages"].([]any); len(msgs) != 1 || msgs[0].(map[string]any)["content"] != "hi" {
		t.Fatalf("RUN_STARTED input %v", in)
	}
	if got, want := reduce(evs).Contents(), snapshotContents(l.snaps[len(l.snaps)-1]); !reflect.DeepEqual(got, want) {
		t.Fatalf("the stream's messages\n%v\nare not the snapshot's\n%v", got, want)
	}
	// The result is the output's JSON text.
	for _, f := range frames {
		if f.Event.Type() == ToolCallResult && f.Event["content"] != `{"results":[]}` {
			t.Fatalf("result %v", f.Event)
		}
	}
}

func TestProjectInterrupt(t *testing.T) {
	l := newLog(t, "t1")
	demoRun(l, true)
	frames := l.project(Options{}, 0, false)
	got := types(frames)
	i := strings.Index(strings.Join(got, "\n"), "RUN_FINISHED interrupt")
	if i < 0 {
		t.Fatalf("no interrupt outcome:\n%s", strings.Join(got, "\n"))
	}
	evs := verify(t, frames)
	var intr map[string]any
	for _, e := range evs {
		if o, ok := e["outcome"].(map[string]any); ok && o["type"] == "interrupt" {
			intr = o["interrupts"].([]any)[0].(map[string]any)
		}
	}
	want := map[string]any{"id": "q1", "reason": "input", "message": "Which detail?", "metadata": map[string]any{"payload": map[string]any{"prompt": "Which detail?"}}}
	if !reflect.DeepEqual(intr, want) {
		t.Fatalf("interrupt %v, want %v", intr, want)
	}
	// The answer starts the next AG-UI run of the same Tether run.
	tail := got[len(got)-7:]
	wantTail := []string{"RUN_STARTED", "TEXT_MESSAGE_START m1", "TEXT_MESSAGE_CONTENT m1", "TEXT_MESSAGE_CONTENT m1", "TEXT_MESSAGE_END m1", "RUN_FINISHED success"}
	if !reflect.DeepEqual(tail[1:], wantTail) {
		t.Fatalf("after the answer: %v", tail)
	}
}

func TestProjectAGUIInterrupt(t *testing.T) {
	l := newLog(t, "t1")
	l.createRun("r1", `{}`)
	l.started("r1")
	l.wait("r1", "i1", KindInterrupt, `{"interrupts":[{"id":"i1","reason":"tool_approval","toolCallId":"c1"}]}`)
	evs := verify(t, l.project(Options{}, 0, false))
	o := evs[len(evs)-1]["outcome"].(map[string]any)
	want := []any{map[string]any{"id": "i1", "reason": "tool_approval", "toolCallId": "c1"}}
	if !reflect.DeepEqual(o["interrupts"], want) {
		t.Fatalf("interrupts %v", o["interrupts"])
	}
	if evs[0]["runId"] != "r1" {
		t.Fatalf("a run not made by AG-UI has its own id as runId: %v", evs[0]["runId"])
	}
}

func TestProjectEnds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status tether.RunStatus
		err    string
		want   string
	}{
		{"error", tether.RunError, `{"code":"demo_failure","message":"failed"}`, "RUN_ERROR demo_failure"},
		{"aborted", tether.RunAborted, `{"code":"server_restart","message":"restarted"}`, "RUN_ERROR server_restart"},
		{"aborted without error", tether.RunAborted, "", "RUN_ERROR aborted"},
		{"cancelled", tether.RunCancelled, "", "RUN_FINISHED cancelled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLog(t, "t1")
			l.createRun("r1", `{}`)
			l.started("r1")
			l.msg("r1", "m1")
			l.text("r1", "m1", "partial")
			l.add(&tether.Event{Type: tether.EventToolStarted, RunID: "r1", MessageID: "m1", CallID: "c1", Name: "x"})
			l.finish("r1", tc.status, tc.err)
			frames := l.project(Options{}, 0, false)
			verify(t, frames)
			got := types(frames)
			if got[len(got)-1] != tc.want || got[len(got)-2] != "TOOL_CALL_END c1" {
				t.Fatalf("got %v", got)
			}
		})
	}
	t.Run("cancelled before it started", func(t *testing.T) {
		l := newLog(t, "t1")
		l.createRun("r1", `{}`, tether.InputMessage{ID: "u1", Role: tether.RoleUser, Content: "hi"})
		l.finish("r1", tether.RunCancelled, "")
		got := types(l.project(Options{}, 0, false))
		if !reflect.DeepEqual(got, []string{"RUN_STARTED", "RUN_FINISHED cancelled"}) {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("a call left for the front end", func(t *testing.T) {
		l := newLog(t, "t1")
		l.createRun("r1", `{}`)
		l.started("r1")
		l.msg("r1", "m1")
		l.tool("r1", "m1", "c1", "confirm", []string{`{}`}, "")
		l.tool("r1", "m1", "c2", "search", nil, `"done"`)
		l.endMsg("r1", "m1")
		l.finish("r1", tether.RunDone, "")
		evs := verify(t, l.project(Options{}, 0, false))
		o := evs[len(evs)-1]["outcome"].(map[string]any)
		if !reflect.DeepEqual(o["pendingToolCallIds"], []any{"c1"}) {
			t.Fatalf("outcome %v", o)
		}
		// The same from the snapshot.
		evs = verify(t, l.project(Options{}, len(l.events), true))
		if o := evs[len(evs)-1]["outcome"].(map[string]any); !reflect.DeepEqual(o["pendingToolCallIds"], []any{"c1"}) {
			t.Fatalf("prelude outcome %v", o)
		}
	})
}

func TestProjectCustom(t *testing.T) {
	l := newLog(t, "t1")
	l.createRun("r1", `{}`)
	l.started("r1")
	custom := func(name, data string) {
		l.add(&tether.Event{Type: tether.EventCustom, RunID: "r1", Name: name, Data: json.RawMessage(data)})
	}
	custom("ag-ui.STEP_STARTED", `{"type":"STEP_STARTED","stepName":"plan","timestamp":5}`)
	custom("ag-ui.RAW", `{"type":"RAW","event":{"x":1},"metadata":{"up":true}}`)
	custom("ag-ui.STEP_FINISHED", `{"type":"STEP_FINISHED","stepName":"other"}`) // never started: not sent
	custom("ag-ui.TEXT_MESSAGE_START", `{"type":"TEXT_MESSAGE_START","messageId":"x"}`)
	custom("ag-ui.RAW", `[1]`)
	custom("progress", `{"pct":5}`)
	custom("ag-ui.STEP_STARTED", `{"type":"STEP_STARTED","stepName":"act"}`)
	l.finish("r1", tether.RunDone, "")
	frames := l.project(Options{}, 0, false)
	evs := verify(t, frames)
	want := []string{"RUN_STARTED", "STEP_STARTED plan", "RAW", "CUSTOM ag-ui.TEXT_MESSAGE_START", "CUSTOM ag-ui.RAW", "CUSTOM progress",
		"STEP_STARTED act", "STEP_FINISHED act", "STEP_FINISHED plan", "RUN_FINISHED success"}
	if got := types(frames); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
	if evs[1]["timestamp"] != float64(5) {
		t.Fatalf("the upstream event is sent as received: %v", evs[1])
	}
	md := evs[2]["metadata"].(map[string]any)
	if md["up"] != true || md["tether"] == nil {
		t.Fatalf("metadata merged: %v", md)
	}
	if evs[5]["value"].(map[string]any)["pct"] != float64(5) {
		t.Fatalf("CUSTOM value: %v", evs[5])
	}
}

func TestProjectRunFilter(t *testing.T) {
	l := newLog(t, "t1")
	demoRun(l, false)
	l.createRun("r2", `{}`)
	l.started("r2")
	l.finish("r2", tether.RunDone, "")
	all := l.project(Options{}, 0, false)
	one := l.project(Options{Run: "r2"}, 0, false)
	if len(one) != 2 || len(all) <= len(one) {
		t.Fatalf("filtered %v of %v", types(one), types(all))
	}
	for _, f := range one {
		if f.RunID != "r2" {
			t.Fatalf("frame of %s", f.RunID)
		}
	}
}

func TestFrameSSE(t *testing.T) {
	l := newLog(t, "t1")
	demoRun(l, false)
	frames := l.project(Options{}, 0, false)
	var ids int
	for i, f := range frames {
		s := string(f.SSE())
		if strings.Contains(s, "\r") || !strings.HasSuffix(s, "\n\n") || strings.Count(s, "\n\n") != 1 {
			t.Fatalf("frame %q", s)
		}
		if strings.HasPrefix(s, "id: ") {
			ids++
			if !f.Last {
				t.Fatalf("id on a frame that is not its group's last: %q", s)
			}
			if i+1 < len(frames) && frames[i+1].Offset == f.Offset {
				t.Fatalf("group goes on after its id")
			}
		}
		var e struct {
			Metadata struct {
				Tether Metadata `json:"tether"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(strings.SplitN(s, "data: ", 2)[1]), &e); err != nil || e.Metadata.Tether.Offset != f.Offset || e.Metadata.Tether.RunID != "r1" {
			t.Fatalf("metadata of %q: %+v %v", s, e, err)
		}
	}
	if ids != len(l.events)-3 { // run.created, message.created and message.started make no frame
		t.Fatalf("%d ids for %d events", ids, len(l.events))
	}
}

// TestJoinAtEveryOffset is the projection's central property: for random
// logs, at every offset, the join prelude of the snapshot there followed
// by the events after it is a valid AG-UI stream, and leaves a client
// with exactly the thread's messages; and a projector that read the log up
// to there continues with the same frames as one that loaded the
// snapshot.
func TestJoinAtEveryOffset(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 15
	}
	for seed := range seeds {
		l := randomLog(t, rand.New(rand.NewPCG(uint64(seed), 7)))
		final := snapshotContents(l.snaps[len(l.snaps)-1])
		full := verify(t, l.project(Options{}, 0, false))
		if got := reduce(full).Contents(); !reflect.DeepEqual(got, final) {
			t.Fatalf("seed %d: the stream's messages\n%v\nare not the snapshot's\n%v", seed, got, final)
		}
		// In the same order: a page that reloads shows what it showed.
		if got, want := reduce(full).IDs(), snapshotIDs(l.snaps[len(l.snaps)-1]); !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: the stream's messages in the order\n%v\nthe snapshot's\n%v", seed, got, want)
		}
		for k := range l.events {
			joined := l.project(Options{}, k, true)
			evs := verify(t, joined)
			if len(evs) > 0 && !reflect.DeepEqual(reduce(evs).Contents(), final) {
				t.Fatalf("seed %d, joined at %d: messages\n%v\nwant\n%v", seed, k, reduce(evs).Contents(), final)
			}
			// Read up to k, or loaded at k: the same frames after it.
			read := New("t1", Options{})
			for _, e := range l.events[:k] {
				read.Event(e)
			}
			loaded := New("t1", Options{})
			loaded.Load(l.snaps[k])
			for _, e := range l.events[k:] {
				// Steps are not Tether state (see the package's Caveats).
				a, b := noSteps(read.Event(e)), noSteps(loaded.Event(e))
				if !reflect.DeepEqual(dump(a), dump(b)) {
					t.Fatalf("seed %d, from %d, event %s: read\n%s\nloaded\n%s", seed, k, e.Offset, dump(a), dump(b))
				}
			}
		}
	}
}

func noSteps(frames []Frame) []Frame {
	var out []Frame
	for _, f := range frames {
		if t := f.Event.Type(); t != StepStarted && t != StepFinished {
			f.Last = false
			out = append(out, f)
		}
	}
	return out
}

func TestProjectState(t *testing.T) {
	l := newLog(t, "t1")
	l.createRun("r1", `{}`)
	l.started("r1")
	l.add(&tether.Event{Type: tether.EventStateSnapshot, RunID: "r1", State: json.RawMessage(`{"n":1,"tags":[]}`)})
	l.add(&tether.Event{Type: tether.EventStateDelta, RunID: "r1", Patch: json.RawMessage(`[{"op":"replace","path":"/n","value":2}]`)})
	l.wait("r1", "q1", "input", `"?"`)
	// A change while the run waits has no AG-UI run to go in: it goes in
	// the next one.
	l.add(&tether.Event{Type: tether.EventStateDelta, RunID: "r1", Patch: json.RawMessage(`[{"op":"add","path":"/tags/-","value":"x"}]`)})
	l.input("r1", "q1", `"a"`)
	l.add(&tether.Event{Type: tether.EventStateSnapshot, RunID: "r1", State: json.RawMessage(`null`)}) // back to null
	l.add(&tether.Event{Type: tether.EventStateSnapshot, RunID: "r1", State: json.RawMessage(`{"n":3}`)})
	l.finish("r1", tether.RunDone, "")
	frames := l.project(Options{}, 0, false)
	evs := verify(t, frames)
	want := []string{"RUN_STARTED", "STATE_SNAPSHOT", "STATE_DELTA", "RUN_FINISHED interrupt",
		"RUN_STARTED", "STATE_DELTA", "STATE_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED success"}
	if got := types(frames); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
	if !reflect.DeepEqual(evs[2]["delta"], []any{map[string]any{"op": "replace", "path": "/n", "value": float64(2)}}) || evs[6]["snapshot"] != nil {
		t.Fatalf("state events %v %v", evs[2], evs[6])
	}
	if _, ok := evs[6]["snapshot"]; !ok {
		t.Fatal("a null state is sent as snapshot: null")
	}
	// The prelude carries the state as of its snapshot.
	for k, want := range map[int]string{len(l.events): `{"n":3}`, 4: `{"n":2,"tags":[]}`, 6: `{"n":2,"tags":["x"]}`} {
		var got string
		for _, f := range l.project(Options{}, k, true) {
			if f.Prelude && f.Event.Type() == StateSnapshot {
				got = string(f.Event["snapshot"].(json.RawMessage))
			}
		}
		if got != want {
			t.Errorf("prelude at %d: state %s, want %s", k, got, want)
		}
	}
}

// A run created with a state (a front end's, engine.RunRequest.State)
// sets it while pending, where no AG-UI run is open: it follows the run's
// RUN_STARTED, in a stream read from before the run and in a join before
// the run started.
func TestProjectStateOfAPendingRun(t *testing.T) {
	l := newLog(t, "t1")
	l.createRun("r1", `{}`, tether.InputMessage{ID: "u1", Role: tether.RoleUser, Content: "hi"})
	l.add(&tether.Event{Type: tether.EventStateSnapshot, RunID: "r1", State: json.RawMessage(`{"n":5}`)})
	l.started("r1")
	l.finish("r1", tether.RunDone, "")
	want := []string{"RUN_STARTED", "STATE_SNAPSHOT", "RUN_FINISHED success"}
	for k := range 4 { // up to the run.started

		frames := l.project(Options{}, k, true)
		verify(t, frames)
		if got := types(frames); !reflect.DeepEqual(got, want) {
			t.Fatalf("joined at %d: %v, want %v", k, got, want)
		}
		for _, f := range frames {
			if f.Event.Type() == StateSnapshot && string(f.Event["snapshot"].(json.RawMessage)) != `{"n":5}` {
				t.Fatalf("joined at %d: %v", k, f.Event)
			}
		}
	}
}
