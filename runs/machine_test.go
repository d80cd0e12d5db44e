package runs

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
)

type ruleCase struct {
	name   string
	prefix []*tether.Event
	event  *tether.Event
	code   tether.Code // "" when the event is valid
	msg    string      // a substring of the error message, if set
	check  func(t *testing.T, m *Machine)
}

var (
	pending   = []*tether.Event{runCreated("r1")}
	running   = seq(pending, []*tether.Event{runStarted("r1")})
	streaming = seq(running, []*tether.Event{msgStarted("r1", "m1")})
	withTool  = seq(streaming, []*tether.Event{toolStarted("r1", "m1", "c1")})
	waiting   = seq(running, []*tether.Event{runWaiting("r1", "q1")})
	done      = seq(streaming, []*tether.Event{runFinished("r1", tether.RunDone)})
	twoRuns   = seq(running, []*tether.Event{runCreated("r2")})
	finishedM = seq(streaming, []*tether.Event{msgFinished("r1", "m1", tether.MessageDone)})
)

const (
	bad = tether.CodeBadRequest
	cfl = tether.CodeConflict
)

func TestRules(t *testing.T) {
	cases := []ruleCase{
		// Every event.
		{name: "unknown type", prefix: running, event: &tether.Event{Type: "run.paused", RunID: "r1"}, code: bad, msg: `unknown event type "run.paused"`},
		{name: "no type", prefix: running, event: &tether.Event{RunID: "r1"}, code: bad, msg: `field "type" is required`},
		{name: "no run_id", prefix: running, event: custom(""), code: bad, msg: `field "run_id" is required in custom`},
		{name: "unknown run", prefix: running, event: custom("r9"), code: bad, msg: "run r9 not found"},
		{name: "field not allowed", prefix: streaming, event: with(msgFinished("r1", "m1", "done"), func(e *tether.Event) { e.Delta = "x" }), code: bad, msg: `field "delta" is not allowed in message.finished`},
		{name: "null counts as set", prefix: streaming, event: with(textDelta("r1", "m1", "x"), func(e *tether.Event) { e.Output = json.RawMessage("null") }), code: bad, msg: `field "output" is not allowed in text.delta`},
		{name: "event after run finished", prefix: done, event: textDelta("r1", "m1", "x"), code: cfl, msg: "run r1 is finished"},
		{name: "custom after run finished", prefix: done, event: custom("r1"), code: cfl},
		{name: "last_update_at", prefix: running, event: custom("r1"), check: func(t *testing.T, m *Machine) {
			r, _ := m.Run("r1")
			wantTime(t, "last_update_at", r.LastUpdateAt, at(3))
		}},

		// run.created
		{name: "run.created", event: runCreated("r1"), check: func(t *testing.T, m *Machine) {
			r, _ := m.Run("r1")
			wantEq(t, "status", r.Status, tether.RunPending)
			wantTime(t, "created_at", r.CreatedAt, at(1))
			wantTime(t, "last_update_at", r.LastUpdateAt, at(1))
			wantEq(t, "thread", m.ThreadStatus(), tether.ThreadBusy)
			wantEq(t, "active", m.ActiveRunID(), "r1")
			wantEq(t, "latest", m.LatestRunID(), "r1")
		}},
		{name: "run.created keeps created_at", event: with(runCreated("r1"), func(e *tether.Event) { e.Run.CreatedAt = at(100) }), check: func(t *testing.T, m *Machine) {
			r, _ := m.Run("r1")
			wantTime(t, "created_at", r.CreatedAt, at(100))
		}},
		{name: "run.created no run", event: &tether.Event{Type: tether.EventRunCreated, RunID: "r1"}, code: bad, msg: `field "run" is required`},
		{name: "run.created invalid id", event: with(runCreated("r 1"), func(e *tether.Event) {}), code: bad, msg: "not a valid id"},
		{name: "run.created run_id differs", event: with(runCreated("r1"), func(e *tether.Event) { e.RunID = "r2" }), code: bad},
		{name: "run.created other thread", event: with(runCreated("r1"), func(e *tether.Event) { e.Run.ThreadID = "t2" }), code: bad, msg: "names thread t2"},
		{name: "run.created not pending", event: with(runCreated("r1"), func(e *tether.Event) { e.Run.Status = tether.RunRunning }), code: bad},
		{name: "run.created with attempt", event: with(runCreated("r1"), func(e *tether.Event) { e.Run.Attempt = 1 }), code: bad, msg: "run.attempt"},
		{name: "run.created with started_at", event: with(runCreated("r1"), func(e *tether.Event) { e.Run.StartedAt = at(1) }), code: bad},
		{name: "run.created with error", event: with(runCreated("r1"), func(e *tether.Event) { e.Run.Error = &tether.ErrorInfo{Code: "x", Message: "y"} }), code: bad},
		{name: "run.created metadata not object", event: with(runCreated("r1"), func(e *tether.Event) { e.Run.Metadata = json.RawMessage(`[1]`) }), code: bad},
		{name: "run.created twice", prefix: pending, event: runCreated("r1"), code: cfl, msg: "run r1 already exists"},
		{name: "run.created after finish", prefix: done, event: runCreated("r1"), code: cfl},

		// message.created
		{name: "message.created", prefix: pending, event: msgCreated("r1", "m0", tether.RoleUser, "hi"), check: func(t *testing.T, m *Machine) {
			wantMsg(t, m, "m0", MessageInfo{ID: "m0", RunID: "r1", Role: tether.RoleUser, Status: tether.MessageDone, Input: true})
			wantEq(t, "running", len(m.RunningMessages("r1")), 0)
		}},
		{name: "message.created error status", prefix: running, event: with(msgCreated("r1", "m0", tether.RoleAssistant, "x"), func(e *tether.Event) { e.Message.Status = tether.MessageError }), check: func(t *testing.T, m *Machine) {
			wantMsg(t, m, "m0", MessageInfo{ID: "m0", RunID: "r1", Role: tether.RoleAssistant, Status: tether.MessageError})
		}},
		{name: "message.created with tools", prefix: running, event: with(msgCreated("r1", "m0", tether.RoleAssistant, "x"), func(e *tether.Event) {
			e.Message.Parts = append(e.Message.Parts,
				tether.Part{Type: tether.PartTool, CallID: "c1", Name: "a", Input: json.RawMessage(`{}`)},
				tether.Part{Type: tether.PartTool, CallID: "c2", Name: "b", Error: json.RawMessage(`{"message":"x"}`)},
				tether.Part{Type: tether.PartData, Name: "d", Data: json.RawMessage(`[1]`)})
		}), check: func(t *testing.T, m *Machine) {
			ms := m.msgs["m0"]
			wantEq(t, "tools", len(ms.tools), 2)
			wantEq(t, "c1", ms.tools[0].status, tether.ToolDone)
			wantEq(t, "c2", ms.tools[1].status, tether.ToolError)
		}},
		{name: "message.created no message", prefix: pending, event: &tether.Event{Type: tether.EventMessageCreated, RunID: "r1"}, code: bad},
		{name: "message.created invalid id", prefix: pending, event: msgCreated("r1", "m/0", tether.RoleUser, "x"), code: bad},
		{name: "message.created no role", prefix: pending, event: msgCreated("r1", "m0", "", "x"), code: bad, msg: `"message.role" is required`},
		{name: "message.created bad role", prefix: pending, event: msgCreated("r1", "m0", "robot", "x"), code: bad},
		{name: "message.created running", prefix: pending, event: with(msgCreated("r1", "m0", tether.RoleUser, "x"), func(e *tether.Event) { e.Message.Status = tether.MessageRunning }), code: bad},
		{name: "message.created other run", prefix: pending, event: with(msgCreated("r1", "m0", tether.RoleUser, "x"), func(e *tether.Event) { e.Message.RunID = "r2" }), code: bad},
		{name: "message.created other thread", prefix: pending, event: with(msgCreated("r1", "m0", tether.RoleUser, "x"), func(e *tether.Event) { e.Message.ThreadID = "t2" }), code: bad},
		{name: "message.created unknown part", prefix: pending, event: with(msgCreated("r1", "m0", tether.RoleUser, "x"), func(e *tether.Event) { e.Message.Parts[0].Type = "image" }), code: bad, msg: `unknown type "image"`},
		{name: "message.created text part with call_id", prefix: pending, event: with(msgCreated("r1", "m0", tether.RoleUser, "x"), func(e *tether.Event) { e.Message.Parts[0].CallID = "c1" }), code: bad, msg: `field "call_id" is not allowed in a text part`},
		{name: "message.created tool without call_id", prefix: pending, event: with(msgCreated("r1", "m0", tether.RoleUser, "x"), func(e *tether.Event) {
			e.Message.Parts = []tether.Part{{Type: tether.PartTool, Name: "a"}}
		}), code: bad},
		{name: "message.created tool without name", prefix: pending, event: with(msgCreated("r1", "m0", tether.RoleUser, "x"), func(e *tether.Event) {
			e.Message.Parts = []tether.Part{{Type: tether.PartTool, CallID: "c1"}}
		}), code: bad},
		{name: "message.created tool running", prefix: pending, event: with(msgCreated("r1", "m0", tether.RoleUser, "x"), func(e *tether.Event) {
			e.Message.Parts = []tether.Part{{Type: tether.PartTool, CallID: "c1", Name: "a", Status: tether.ToolRunning}}
		}), code: bad},
		{name: "message.created duplicate call_id", prefix: pending, event: with(msgCreated("r1", "m0", tether.RoleUser, "x"), func(e *tether.Event) {
			e.Message.Parts = []tether.Part{{Type: tether.PartTool, CallID: "c1", Name: "a"}, {Type: tether.PartTool, CallID: "c1", Name: "b"}}
		}), code: bad},
		{name: "message.created duplicate id", prefix: streaming, event: msgCreated("r1", "m1", tether.RoleUser, "x"), code: cfl, msg: "message m1 already exists"},
		{name: "message.created finished run", prefix: done, event: msgCreated("r1", "m9", tether.RoleUser, "x"), code: cfl},

		// run.started
		{name: "run.started", prefix: pending, event: runStarted("r1"), check: func(t *testing.T, m *Machine) {
			r, _ := m.Run("r1")
			wantEq(t, "status", r.Status, tether.RunRunning)
			wantEq(t, "attempt", r.Attempt, 1)
			wantEq(t, "worker", r.WorkerID, "w1")
			wantTime(t, "started_at", r.StartedAt, at(2))
			a, ok := m.ActiveRun()
			wantEq(t, "active", a.ID+" "+boolStr(ok), "r1 true")
		}},
		{name: "run.started attempt", prefix: pending, event: with(runStarted("r1"), func(e *tether.Event) { e.Attempt = 3 }), check: func(t *testing.T, m *Machine) {
			r, _ := m.Run("r1")
			wantEq(t, "attempt", r.Attempt, 3)
		}},
		{name: "run.started no worker", prefix: pending, event: with(runStarted("r1"), func(e *tether.Event) { e.WorkerID = "" }), code: bad, msg: `"worker_id" is required`},
		{name: "run.started negative attempt", prefix: pending, event: with(runStarted("r1"), func(e *tether.Event) { e.Attempt = -1 }), code: bad},
		{name: "run.started twice", prefix: running, event: runStarted("r1"), code: cfl, msg: "already started"},
		{name: "run.started same attempt", prefix: running, event: with(runStarted("r1"), func(e *tether.Event) { e.Attempt = 1 }), code: cfl},
		{name: "run.started reclaim", prefix: running, event: with(runStarted("r1"), func(e *tether.Event) { e.Attempt = 2; e.WorkerID = "w2" }), check: func(t *testing.T, m *Machine) {
			r, _ := m.Run("r1")
			wantEq(t, "attempt", r.Attempt, 2)
			wantEq(t, "worker", r.WorkerID, "w2")
			wantTime(t, "started_at", r.StartedAt, at(2))
		}},
		{name: "run.started reclaim waiting", prefix: waiting, event: with(runStarted("r1"), func(e *tether.Event) { e.Attempt = 2 }), check: func(t *testing.T, m *Machine) {
			r, _ := m.Run("r1")
			wantEq(t, "status", r.Status, tether.RunWaiting)
			wantEq(t, "request kept", r.Request != nil, true)
			wantEq(t, "thread", m.ThreadStatus(), tether.ThreadWaiting)
		}},
		{name: "run.started other active", prefix: twoRuns, event: runStarted("r2"), code: cfl, msg: "run r1 is active"},
		{name: "run.started after other finished", prefix: seq(twoRuns, []*tether.Event{runFinished("r1", tether.RunDone)}), event: runStarted("r2")},
		{name: "run.started finished", prefix: done, event: runStarted("r1"), code: cfl},

		// message.started
		{name: "message.started", prefix: running, event: msgStarted("r1", "m1"), check: func(t *testing.T, m *Machine) {
			wantMsg(t, m, "m1", MessageInfo{ID: "m1", RunID: "r1", Role: tether.RoleAssistant, Status: tether.MessageRunning})
			wantEq(t, "running", strings.Join(m.RunningMessages("r1"), ","), "m1")
		}},
		{name: "message.started waiting run", prefix: waiting, event: msgStarted("r1", "m1")},
		{name: "message.started metadata", prefix: running, event: with(msgStarted("r1", "m1"), func(e *tether.Event) { e.Metadata = json.RawMessage(`{"a":1}`) })},
		{name: "message.started metadata null", prefix: running, event: with(msgStarted("r1", "m1"), func(e *tether.Event) { e.Metadata = json.RawMessage(`null`) })},
		{name: "message.started metadata not object", prefix: running, event: with(msgStarted("r1", "m1"), func(e *tether.Event) { e.Metadata = json.RawMessage(`"a"`) }), code: bad},
		{name: "message.started no id", prefix: running, event: msgStarted("r1", ""), code: bad, msg: `"message_id" is required`},
		{name: "message.started invalid id", prefix: running, event: msgStarted("r1", strings.Repeat("m", 129)), code: bad, msg: "…"},
		{name: "message.started no role", prefix: running, event: with(msgStarted("r1", "m1"), func(e *tether.Event) { e.Role = "" }), code: bad},
		{name: "message.started bad role", prefix: running, event: with(msgStarted("r1", "m1"), func(e *tether.Event) { e.Role = "bot" }), code: bad},
		{name: "message.started duplicate", prefix: streaming, event: msgStarted("r1", "m1"), code: cfl, msg: "message m1 already exists"},
		{name: "message.started duplicate finished", prefix: finishedM, event: msgStarted("r1", "m1"), code: cfl},
		{name: "message.started id of other run", prefix: seq(done, []*tether.Event{runCreated("r2"), runStarted("r2")}), event: msgStarted("r2", "m1"), code: cfl},
		{name: "message.started pending run", prefix: pending, event: msgStarted("r1", "m1"), code: cfl, msg: "run r1 has not started"},

		// text.delta, reasoning.delta
		{name: "text.delta", prefix: streaming, event: textDelta("r1", "m1", "x"), check: func(t *testing.T, m *Machine) {
			wantTime(t, "message last_update_at", m.msgs["m1"].updated, at(4))
		}},
		{name: "text.delta empty", prefix: streaming, event: textDelta("r1", "m1", ""), check: func(t *testing.T, m *Machine) {
			wantTime(t, "message last_update_at", m.msgs["m1"].updated, at(4))
		}},
		{name: "text.delta no message_id", prefix: streaming, event: textDelta("r1", "", "x"), code: bad},
		{name: "text.delta unknown message", prefix: streaming, event: textDelta("r1", "m2", "x"), code: bad, msg: "message m2 not found"},
		{name: "text.delta other run", prefix: seq(streaming, []*tether.Event{runCreated("r2")}), event: textDelta("r2", "m1", "x"), code: bad, msg: "belongs to run r1"},
		{name: "text.delta finished message", prefix: finishedM, event: textDelta("r1", "m1", "x"), code: cfl, msg: "message m1 is finished"},
		{name: "text.delta on waiting run", prefix: seq(streaming, []*tether.Event{runWaiting("r1", "q1")}), event: textDelta("r1", "m1", "x")},
		{name: "reasoning.delta", prefix: streaming, event: reasoningDelta("r1", "m1", "x")},
		{name: "reasoning.delta finished message", prefix: finishedM, event: reasoningDelta("r1", "m1", "x"), code: cfl},
		{name: "reasoning.delta unknown message", prefix: streaming, event: reasoningDelta("r1", "zz", "x"), code: bad},

		// tool.started
		{name: "tool.started", prefix: streaming, event: toolStarted("r1", "m1", "c1"), check: func(t *testing.T, m *Machine) {
			wantEq(t, "tool", m.msgs["m1"].tools[0], toolState{"c1", tether.ToolRunning})
		}},
		{name: "tool.started no call_id", prefix: streaming, event: toolStarted("r1", "m1", ""), code: bad},
		{name: "tool.started invalid call_id", prefix: streaming, event: toolStarted("r1", "m1", "c 1"), code: bad},
		{name: "tool.started no name", prefix: streaming, event: with(toolStarted("r1", "m1", "c1"), func(e *tether.Event) { e.Name = "" }), code: bad},
		{name: "tool.started unknown message", prefix: streaming, event: toolStarted("r1", "m2", "c1"), code: bad},
		{name: "tool.started finished message", prefix: finishedM, event: toolStarted("r1", "m1", "c1"), code: cfl},
		{name: "tool.started duplicate", prefix: withTool, event: toolStarted("r1", "m1", "c1"), code: cfl, msg: "tool call c1 already exists"},
		{name: "tool.started same call_id in another message", prefix: seq(withTool, []*tether.Event{msgStarted("r1", "m2")}), event: toolStarted("r1", "m2", "c1")},

		// tool.delta
		{name: "tool.delta", prefix: withTool, event: toolDelta("r1", "m1", "c1", "{")},
		{name: "tool.delta no call_id", prefix: withTool, event: toolDelta("r1", "m1", "", "{"), code: bad},
		{name: "tool.delta unknown call", prefix: withTool, event: toolDelta("r1", "m1", "c2", "{"), code: bad, msg: "tool call c2 not found in message m1"},
		{name: "tool.delta finished call", prefix: seq(withTool, []*tether.Event{toolFinished("r1", "m1", "c1")}), event: toolDelta("r1", "m1", "c1", "{"), code: cfl, msg: "tool call c1 is finished"},
		{name: "tool.delta finished message", prefix: seq(withTool, []*tether.Event{msgFinished("r1", "m1", "done")}), event: toolDelta("r1", "m1", "c1", "{"), code: cfl},

		// tool.finished
		{name: "tool.finished", prefix: withTool, event: with(toolFinished("r1", "m1", "c1"), func(e *tether.Event) { e.Output = json.RawMessage(`1`) }), check: func(t *testing.T, m *Machine) {
			wantEq(t, "tool", m.msgs["m1"].tools[0].status, tether.ToolDone)
		}},
		{name: "tool.finished error", prefix: withTool, event: with(toolFinished("r1", "m1", "c1"), func(e *tether.Event) { e.Error = json.RawMessage(`"boom"`) }), check: func(t *testing.T, m *Machine) {
			wantEq(t, "tool", m.msgs["m1"].tools[0].status, tether.ToolError)
		}},
		{name: "tool.finished null error", prefix: withTool, event: with(toolFinished("r1", "m1", "c1"), func(e *tether.Event) { e.Error = json.RawMessage(`null`) }), check: func(t *testing.T, m *Machine) {
			wantEq(t, "tool", m.msgs["m1"].tools[0].status, tether.ToolDone)
		}},
		{name: "tool.finished invalid JSON", prefix: withTool, event: with(toolFinished("r1", "m1", "c1"), func(e *tether.Event) { e.Input = json.RawMessage(`{`) }), code: bad, msg: "not valid JSON"},
		{name: "tool.finished unknown call", prefix: withTool, event: toolFinished("r1", "m1", "c9"), code: bad},
		{name: "tool.finished twice", prefix: seq(withTool, []*tether.Event{toolFinished("r1", "m1", "c1")}), event: toolFinished("r1", "m1", "c1"), code: cfl},

		// message.updated
		{name: "message.updated", prefix: streaming, event: msgUpdated("r1", "m1", `{"a":1}`)},
		{name: "message.updated finished message", prefix: finishedM, event: msgUpdated("r1", "m1", `{"a":1}`), check: func(t *testing.T, m *Machine) {
			wantTime(t, "message last_update_at", m.msgs["m1"].updated, at(5))
		}},
		{name: "message.updated no metadata", prefix: streaming, event: msgUpdated("r1", "m1", ``), code: bad, msg: `"metadata" is required`},
		{name: "message.updated null", prefix: streaming, event: msgUpdated("r1", "m1", `null`), code: bad},
		{name: "message.updated array", prefix: streaming, event: msgUpdated("r1", "m1", `[]`), code: bad},
		{name: "message.updated invalid JSON", prefix: streaming, event: msgUpdated("r1", "m1", `{"a":`), code: bad},
		{name: "message.updated unknown message", prefix: streaming, event: msgUpdated("r1", "m9", `{}`), code: bad},
		{name: "message.updated finished run", prefix: done, event: msgUpdated("r1", "m1", `{}`), code: cfl},

		// message.finished
		{name: "message.finished", prefix: withTool, event: msgFinished("r1", "m1", tether.MessageDone), check: func(t *testing.T, m *Machine) {
			wantEq(t, "status", m.msgs["m1"].status, tether.MessageDone)
			wantEq(t, "tool", m.msgs["m1"].tools[0].status, tether.ToolDone)
			wantEq(t, "running", len(m.RunningMessages("r1")), 0)
		}},
		{name: "message.finished error ends tools error", prefix: withTool, event: msgFinished("r1", "m1", tether.MessageError), check: func(t *testing.T, m *Machine) {
			wantEq(t, "tool", m.msgs["m1"].tools[0].status, tether.ToolError)
		}},
		{name: "message.finished aborted", prefix: withTool, event: msgFinished("r1", "m1", tether.MessageAborted), check: func(t *testing.T, m *Machine) {
			wantEq(t, "tool", m.msgs["m1"].tools[0].status, tether.ToolError)
		}},
		{name: "message.finished no status", prefix: streaming, event: msgFinished("r1", "m1", ""), code: bad},
		{name: "message.finished running", prefix: streaming, event: msgFinished("r1", "m1", tether.MessageRunning), code: bad, msg: "must be one of done|error|aborted"},
		{name: "message.finished twice", prefix: finishedM, event: msgFinished("r1", "m1", tether.MessageDone), code: cfl},
		{name: "message.finished unknown", prefix: streaming, event: msgFinished("r1", "m2", tether.MessageDone), code: bad},

		// run.waiting
		{name: "run.waiting", prefix: running, event: runWaiting("r1", "q1"), check: func(t *testing.T, m *Machine) {
			r, _ := m.Run("r1")
			wantEq(t, "status", r.Status, tether.RunWaiting)
			wantEq(t, "request", r.Request.ID, "q1")
			wantEq(t, "thread", m.ThreadStatus(), tether.ThreadWaiting)
			wantEq(t, "active", m.ActiveRunID(), "r1")
		}},
		{name: "run.waiting no request", prefix: running, event: &tether.Event{Type: tether.EventRunWaiting, RunID: "r1"}, code: bad},
		{name: "run.waiting invalid id", prefix: running, event: runWaiting("r1", ""), code: bad, msg: `"request.id" is required`},
		{name: "run.waiting no kind", prefix: running, event: with(runWaiting("r1", "q1"), func(e *tether.Event) { e.Request = &tether.Request{ID: "q1"} }), code: bad},
		{name: "run.waiting pending", prefix: pending, event: runWaiting("r1", "q1"), code: cfl},
		{name: "run.waiting twice", prefix: waiting, event: runWaiting("r1", "q2"), code: cfl, msg: "already waiting on request q1"},

		// run.input
		{name: "run.input", prefix: waiting, event: runInput("r1", "q1"), check: func(t *testing.T, m *Machine) {
			r, _ := m.Run("r1")
			wantEq(t, "status", r.Status, tether.RunRunning)
			wantEq(t, "request", r.Request == nil, true)
			wantEq(t, "thread", m.ThreadStatus(), tether.ThreadBusy)
		}},
		{name: "run.input no value", prefix: waiting, event: with(runInput("r1", "q1"), func(e *tether.Event) { e.Value = nil })},
		{name: "run.input no request_id", prefix: waiting, event: runInput("r1", ""), code: bad},
		{name: "run.input invalid request_id", prefix: waiting, event: runInput("r1", "q 1"), code: bad},
		{name: "run.input wrong request", prefix: waiting, event: runInput("r1", "q2"), code: cfl, msg: "waiting on request q1, not q2"},
		{name: "run.input not waiting", prefix: running, event: runInput("r1", "q1"), code: cfl, msg: "run r1 is not waiting"},
		{name: "run.input twice", prefix: seq(waiting, []*tether.Event{runInput("r1", "q1")}), event: runInput("r1", "q1"), code: cfl},

		// custom
		{name: "custom", prefix: pending, event: with(custom("r1"), func(e *tether.Event) { e.Data = json.RawMessage(`{"x":1}`) })},
		{name: "custom no name", prefix: running, event: with(custom("r1"), func(e *tether.Event) { e.Name = "" }), code: bad},

		// run.cancel_requested
		{name: "run.cancel_requested", prefix: running, event: cancelRequested("r1"), check: func(t *testing.T, m *Machine) {
			r, _ := m.Run("r1")
			wantTime(t, "cancel_requested_at", r.CancelRequestedAt, at(3))
		}},
		{name: "run.cancel_requested twice", prefix: seq(running, []*tether.Event{cancelRequested("r1")}), event: cancelRequested("r1"), check: func(t *testing.T, m *Machine) {
			r, _ := m.Run("r1")
			wantTime(t, "cancel_requested_at", r.CancelRequestedAt, at(3))
			wantTime(t, "last_update_at", r.LastUpdateAt, at(4))
		}},
		{name: "run.cancel_requested pending", prefix: pending, event: cancelRequested("r1")},
		{name: "run.cancel_requested finished", prefix: done, event: cancelRequested("r1"), code: cfl},
		{name: "run.cancel_requested with field", prefix: running, event: with(cancelRequested("r1"), func(e *tether.Event) { e.Name = "x" }), code: bad},

		// run.finished
		{name: "run.finished", prefix: seq(withTool, []*tether.Event{msgStarted("r1", "m2")}), event: runFinished("r1", tether.RunDone), check: func(t *testing.T, m *Machine) {
			r, _ := m.Run("r1")
			wantEq(t, "status", r.Status, tether.RunDone)
			wantTime(t, "completed_at", r.CompletedAt, at(6))
			wantEq(t, "m1", m.msgs["m1"].status, tether.MessageDone)
			wantEq(t, "m2", m.msgs["m2"].status, tether.MessageDone)
			wantTime(t, "m1 last_update_at", m.msgs["m1"].updated, at(6))
			wantEq(t, "tool", m.msgs["m1"].tools[0].status, tether.ToolDone)
			wantEq(t, "thread", m.ThreadStatus(), tether.ThreadIdle)
			wantEq(t, "active", m.ActiveRunID(), "")
		}},
		{name: "run.finished error", prefix: withTool, event: with(runFinished("r1", tether.RunError), func(e *tether.Event) { e.Error = json.RawMessage(`{"code":"x","message":"y"}`) }), check: func(t *testing.T, m *Machine) {
			r, _ := m.Run("r1")
			wantEq(t, "error", *r.Error, tether.ErrorInfo{Code: "x", Message: "y"})
			wantEq(t, "m1", m.msgs["m1"].status, tether.MessageError)
			wantEq(t, "tool", m.msgs["m1"].tools[0].status, tether.ToolError)
			wantEq(t, "thread", m.ThreadStatus(), tether.ThreadError)
		}},
		{name: "run.finished cancelled", prefix: withTool, event: runFinished("r1", tether.RunCancelled), check: func(t *testing.T, m *Machine) {
			wantEq(t, "m1", m.msgs["m1"].status, tether.MessageAborted)
			wantEq(t, "tool", m.msgs["m1"].tools[0].status, tether.ToolError)
			wantEq(t, "thread", m.ThreadStatus(), tether.ThreadIdle)
		}},
		{name: "run.finished aborted", prefix: withTool, event: runFinished("r1", tether.RunAborted), check: func(t *testing.T, m *Machine) {
			wantEq(t, "m1", m.msgs["m1"].status, tether.MessageAborted)
			wantEq(t, "thread", m.ThreadStatus(), tether.ThreadError)
		}},
		{name: "run.finished leaves finished messages", prefix: seq(finishedM, []*tether.Event{msgUpdated("r1", "m1", `{}`)}), event: runFinished("r1", tether.RunAborted), check: func(t *testing.T, m *Machine) {
			wantEq(t, "m1", m.msgs["m1"].status, tether.MessageDone)
			// A finished message is not touched by the run's end.
			wantTime(t, "m1 last_update_at", m.msgs["m1"].updated, at(5))
		}},
		{name: "run.finished waiting", prefix: waiting, event: runFinished("r1", tether.RunCancelled), check: func(t *testing.T, m *Machine) {
			r, _ := m.Run("r1")
			wantEq(t, "request", r.Request == nil, true)
			wantEq(t, "thread", m.ThreadStatus(), tether.ThreadIdle)
		}},
		{name: "run.finished pending", prefix: pending, event: runFinished("r1", tether.RunCancelled), check: func(t *testing.T, m *Machine) {
			wantEq(t, "thread", m.ThreadStatus(), tether.ThreadIdle)
			wantEq(t, "active", m.ActiveRunID(), "")
		}},
		{name: "run.finished null error", prefix: running, event: with(runFinished("r1", tether.RunDone), func(e *tether.Event) { e.Error = json.RawMessage(`null`) })},
		{name: "run.finished no status", prefix: running, event: runFinished("r1", ""), code: bad},
		{name: "run.finished bad status", prefix: running, event: runFinished("r1", tether.RunWaiting), code: bad},
		{name: "run.finished error extra key", prefix: running, event: with(runFinished("r1", tether.RunError), func(e *tether.Event) { e.Error = json.RawMessage(`{"code":"x","message":"y","z":1}`) }), code: bad},
		{name: "run.finished error no message", prefix: running, event: with(runFinished("r1", tether.RunError), func(e *tether.Event) { e.Error = json.RawMessage(`{"code":"x"}`) }), code: bad},
		{name: "run.finished error wrong type", prefix: running, event: with(runFinished("r1", tether.RunError), func(e *tether.Event) { e.Error = json.RawMessage(`{"code":1,"message":"y"}`) }), code: bad},
		{name: "run.finished error string", prefix: running, event: with(runFinished("r1", tether.RunError), func(e *tether.Event) { e.Error = json.RawMessage(`"boom"`) }), code: bad},
		{name: "run.finished twice", prefix: done, event: runFinished("r1", tether.RunDone), code: cfl, msg: "run r1 is finished"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { testRule(t, c) })
	}
}

// testRule runs a case through both ways of applying events, a Tx on a
// Machine and State.Apply, which must agree.
func testRule(t *testing.T, c ruleCase) {
	t.Helper()
	evs := stamp(0, append(append([]*tether.Event(nil), c.prefix...), c.event)...)
	prefix, e := evs[:len(evs)-1], evs[len(evs)-1]

	// Through a Tx, the prefix committed in one batch and the event in another.
	m := NewMachine(tid)
	tx := m.Begin()
	for i, p := range prefix {
		if err := tx.Apply(p); err != nil {
			t.Fatalf("prefix event %d (%s): %v", i, p.Type, err)
		}
	}
	tx.Commit()
	before := dump(m)
	tx = m.Begin()
	err := tx.Apply(e)
	checkErr(t, "Tx.Apply", err, c.code, c.msg)
	if err != nil && len(tx.runs)+len(tx.msgs) > 0 {
		t.Errorf("rejected event left %d runs and %d messages in the overlay", len(tx.runs), len(tx.msgs))
	}
	if dump(m) != before {
		t.Errorf("Tx.Apply changed the machine before Commit")
	}
	tx.Commit()
	if err != nil && dump(m) != before {
		t.Errorf("rejected event changed the machine:\nbefore %s\nafter %s", before, dump(m))
	}
	if err == nil && c.check != nil {
		c.check(t, m)
	}

	// Through a State.
	s := NewState(newThread())
	for i, p := range prefix {
		if err := s.Apply(p); err != nil {
			t.Fatalf("State: prefix event %d (%s): %v", i, p.Type, err)
		}
	}
	snap := snapshotJSON(t, s)
	err = s.Apply(e)
	checkErr(t, "State.Apply", err, c.code, c.msg)
	if err != nil {
		if got := snapshotJSON(t, s); got != snap {
			t.Errorf("rejected event changed the state:\nbefore %s\nafter  %s", snap, got)
		}
		if s.Offset() != prefixOffset(prefix) {
			t.Errorf("rejected event moved the offset to %s", s.Offset())
		}
		return
	}
	if got, want := dump(s.Machine()), dump(m); got != want {
		t.Errorf("State and Tx disagree:\nState %s\nTx    %s", got, want)
	}
	if c.check != nil {
		c.check(t, s.Machine())
	}
	checkAgrees(t, s)
}

func prefixOffset(prefix []*tether.Event) tether.Offset {
	if len(prefix) == 0 {
		return tether.OffsetStart
	}
	return prefix[len(prefix)-1].Offset
}

func checkErr(t *testing.T, what string, err error, code tether.Code, msg string) {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Fatalf("%s: %v, want no error", what, err)
		}
		return
	}
	if err == nil {
		t.Fatalf("%s: no error, want %s", what, code)
	}
	var te *tether.Error
	if !errors.As(err, &te) {
		t.Fatalf("%s: %T %v, want a *tether.Error", what, err, err)
	}
	if te.Code != code {
		t.Errorf("%s: %v, want code %s", what, err, code)
	}
	if msg != "" && !strings.Contains(te.Message, msg) {
		t.Errorf("%s: message %q, want it to contain %q", what, te.Message, msg)
	}
	if te.Message == "" || strings.ToLower(te.Message[:1]) != te.Message[:1] || strings.Contains(te.Message, "tether.") {
		t.Errorf("%s: message %q should be short, lowercase and free of Go names", what, te.Message)
	}
}

func wantEq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func wantTime(t *testing.T, what string, got, want tether.Time) {
	t.Helper()
	if !got.Equal(want.Time) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func wantMsg(t *testing.T, m *Machine, id string, want MessageInfo) {
	t.Helper()
	got, ok := m.Message(id)
	if !ok {
		t.Fatalf("message %s not found", id)
	}
	wantEq(t, "message "+id, got, want)
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func TestThreadStatus(t *testing.T) {
	steps := []struct {
		e       *tether.Event
		status  tether.ThreadStatus
		active  string
		next    string // NextPending
		running string // ActiveRun
	}{
		{nil, tether.ThreadIdle, "", "", ""},
		{runCreated("r1"), tether.ThreadBusy, "r1", "r1", ""},
		{runCreated("r2"), tether.ThreadBusy, "r1", "r1", ""},
		{runStarted("r1"), tether.ThreadBusy, "r1", "", "r1"},
		{runWaiting("r1", "q1"), tether.ThreadWaiting, "r1", "", "r1"},
		{runCreated("r3"), tether.ThreadWaiting, "r1", "", "r1"},
		{runInput("r1", "q1"), tether.ThreadBusy, "r1", "", "r1"},
		{runFinished("r1", tether.RunError), tether.ThreadBusy, "r2", "r2", ""},
		{runFinished("r2", tether.RunCancelled), tether.ThreadBusy, "r3", "r3", ""},
		{runStarted("r3"), tether.ThreadBusy, "r3", "", "r3"},
		{runFinished("r3", tether.RunAborted), tether.ThreadError, "", "", ""},
		{runCreated("r4"), tether.ThreadBusy, "r4", "r4", ""},
		{runFinished("r4", tether.RunCancelled), tether.ThreadIdle, "", "", ""},
		{runCreated("r5"), tether.ThreadBusy, "r5", "r5", ""},
		{runStarted("r5"), tether.ThreadBusy, "r5", "", "r5"},
		{runFinished("r5", tether.RunError), tether.ThreadError, "", "", ""},
		{runCreated("r6"), tether.ThreadBusy, "r6", "r6", ""},
		{runStarted("r6"), tether.ThreadBusy, "r6", "", "r6"},
		{runFinished("r6", tether.RunDone), tether.ThreadIdle, "", "", ""},
	}
	s := NewState(newThread())
	for i, st := range steps {
		if st.e != nil {
			e := stamp(i-1, st.e)[0]
			if err := s.Apply(e); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		m := s.Machine()
		wantEq(t, "step status", m.ThreadStatus(), st.status)
		wantEq(t, "step active", m.ActiveRunID(), st.active)
		next, _ := m.NextPending()
		wantEq(t, "step next pending", next.ID, st.next)
		run, _ := m.ActiveRun()
		wantEq(t, "step active run", run.ID, st.running)
		if t.Failed() {
			t.Fatalf("after step %d", i)
		}
	}
	var ids []string
	for _, r := range s.Machine().Runs() {
		ids = append(ids, r.ID)
	}
	wantEq(t, "runs", strings.Join(ids, ","), "r1,r2,r3,r4,r5,r6")
	wantEq(t, "latest", s.Machine().LatestRunID(), "r6")
}

func TestWorkerEvent(t *testing.T) {
	cases := []struct {
		name string
		e    *tether.Event
		ok   bool
	}{
		{"text.delta", textDelta("", "m1", "x"), true},
		{"own run_id", textDelta("r1", "m1", "x"), true},
		{"message.created", msgCreated("", "m1", tether.RoleAssistant, "x"), true},
		{"run.finished error", runFinished("", tether.RunError), true},
		{"run.finished cancelled", runFinished("", tether.RunCancelled), true},
		{"other run_id", textDelta("r2", "m1", "x"), false},
		{"run.created", runCreated("r1"), false},
		{"run.started", runStarted(""), false},
		{"run.input", runInput("", "q1"), false},
		{"run.cancel_requested", cancelRequested(""), false},
		{"run.finished aborted", runFinished("", tether.RunAborted), false},
		{"offset", with(textDelta("", "m1", "x"), func(e *tether.Event) { e.Offset = offset(1) }), false},
		{"ts", with(textDelta("", "m1", "x"), func(e *tether.Event) { e.TS = at(1) }), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := WorkerEvent(c.e, "r1")
			if c.ok {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			checkErr(t, "WorkerEvent", err, tether.CodeBadRequest, "")
		})
	}
}
