package agui

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agui/aguitest"
	"github.com/tetherhq/tether/runs"
)

// tlog is a Tether log being written, each event folded by the real
// reducer (runs.State), which rejects any event a server would not have
// committed.
type tlog struct {
	t      testing.TB
	thread string
	st     *runs.State
	events []*tether.Event
	snaps  []*tether.Snapshot // snaps[i]: the state after events[:i]
	seq    uint64
}

func newLog(t testing.TB, thread string) *tlog {
	l := &tlog{t: t, thread: thread, st: runs.NewState(tether.Thread{ID: thread})}
	l.snaps = append(l.snaps, l.st.Snapshot())
	return l
}

// add appends e if the reducer takes it, and reports whether it did.
func (l *tlog) try(e *tether.Event) bool {
	l.seq++
	e.Offset = tether.FormatOffset(1, l.seq)
	if err := l.st.Apply(e); err != nil {
		return false
	}
	// Round-trip through JSON, as events reach the projector from the log.
	b, _ := json.Marshal(e)
	var c tether.Event
	if err := json.Unmarshal(b, &c); err != nil {
		l.t.Fatal(err)
	}
	l.events = append(l.events, &c)
	l.snaps = append(l.snaps, l.st.Snapshot())
	return true
}

func (l *tlog) add(e *tether.Event) {
	l.t.Helper()
	if !l.try(e) {
		l.t.Fatalf("the reducer refused %s %+v", e.Type, e)
	}
}

func (l *tlog) createRun(id string, metadata string, input ...tether.InputMessage) {
	run := tether.Run{ID: id, ThreadID: l.thread, Agent: "demo", Status: tether.RunPending,
		Input: tether.RunInput{Messages: input}, Metadata: json.RawMessage(metadata)}
	l.add(&tether.Event{Type: tether.EventRunCreated, RunID: id, Run: &run})
	for _, in := range input {
		msg := &tether.Message{ID: in.ID, ThreadID: l.thread, RunID: id, Role: in.Role, Status: tether.MessageDone,
			Parts: []tether.Part{{Type: tether.PartText, Text: in.Content}}, Metadata: in.Metadata}
		l.add(&tether.Event{Type: tether.EventMessageCreated, RunID: id, MessageID: in.ID, Message: msg})
	}
}

func (l *tlog) started(run string) {
	l.add(&tether.Event{Type: tether.EventRunStarted, RunID: run, WorkerID: "w", Attempt: 1})
}

func (l *tlog) msg(run, id string) {
	l.add(&tether.Event{Type: tether.EventMessageStarted, RunID: run, MessageID: id, Role: tether.RoleAssistant})
}

func (l *tlog) text(run, id, delta string) {
	l.add(&tether.Event{Type: tether.EventTextDelta, RunID: run, MessageID: id, Delta: delta})
}

func (l *tlog) reasoning(run, id, delta string) {
	l.add(&tether.Event{Type: tether.EventReasoningDelta, RunID: run, MessageID: id, Delta: delta})
}

func (l *tlog) tool(run, id, call, name string, args []string, output string) {
	l.add(&tether.Event{Type: tether.EventToolStarted, RunID: run, MessageID: id, CallID: call, Name: name})
	for _, a := range args {
		l.add(&tether.Event{Type: tether.EventToolDelta, RunID: run, MessageID: id, CallID: call, Delta: a})
	}
	e := &tether.Event{Type: tether.EventToolFinished, RunID: run, MessageID: id, CallID: call}
	if output != "" {
		e.Output = json.RawMessage(output)
	}
	l.add(e)
}

func (l *tlog) endMsg(run, id string) {
	l.add(&tether.Event{Type: tether.EventMessageFinished, RunID: run, MessageID: id, Status: string(tether.MessageDone)})
}

func (l *tlog) wait(run, req, kind, payload string) {
	l.add(&tether.Event{Type: tether.EventRunWaiting, RunID: run, Request: &tether.Request{ID: req, Kind: kind, Payload: json.RawMessage(payload)}})
}

func (l *tlog) input(run, req, value string) {
	l.add(&tether.Event{Type: tether.EventRunInput, RunID: run, RequestID: req, Value: json.RawMessage(value)})
}

func (l *tlog) finish(run string, status tether.RunStatus, errJSON string) {
	e := &tether.Event{Type: tether.EventRunFinished, RunID: run, Status: string(status)}
	if errJSON != "" {
		e.Error = json.RawMessage(errJSON)
	}
	l.add(e)
}

// project runs a fresh projector over events[from:], after the join
// prelude of the snapshot at from when join is set.
func (l *tlog) project(opts Options, from int, join bool) []Frame {
	p := New(l.thread, opts)
	var out []Frame
	if join {
		out = append(out, p.Join(l.snaps[from])...)
	}
	for _, e := range l.events[from:] {
		out = append(out, p.Event(e)...)
	}
	return out
}

// randomLog writes a random but valid log: runs of an assistant message
// mixing reasoning, text, tool calls (with and without results), custom
// events and steps, some waiting for input, ending every way a run ends;
// runs queued behind others; whole messages.
func randomLog(t testing.TB, r *rand.Rand) *tlog {
	l := newLog(t, "t1")
	nruns := 1 + r.IntN(3)
runs:
	for i := range nruns {
		run := fmt.Sprintf("run_%d", i)
		l.createRun(run, `{"ag_ui":{"runId":"agui-`+run+`","tools":[{"name":"x","description":"d"}]}}`,
			tether.InputMessage{ID: "u" + run, Role: tether.RoleUser, Content: "question " + run})
		if r.IntN(8) == 0 {
			l.finish(run, tether.RunCancelled, "") // cancelled before it started
			continue
		}
		l.started(run)
		m := "m" + run
		l.msg(run, m)
		steps := 0
		waits := 0
		for range 3 + r.IntN(12) {
			switch r.IntN(10) {
			case 0, 1:
				l.reasoning(run, m, fmt.Sprintf("think%d ", r.IntN(100)))
			case 2, 3, 4:
				l.text(run, m, fmt.Sprintf("word%d ", r.IntN(100)))
			case 5:
				call := fmt.Sprintf("%s-c%d", m, r.IntN(1e6))
				out := ""
				switch r.IntN(3) {
				case 0:
					out = `{"ok":true}`
				case 1:
					out = `"plain"`
				}
				args := []string{`{"q":`, `"x"}`}
				if r.IntN(4) == 0 {
					// Cut short (a model out of tokens): the fold keeps
					// the text as a JSON string input.
					args = args[:1]
				}
				l.tool(run, m, call, "search", args, out)
			case 6:
				// A tool call left running (its message or run ends it).
				call := fmt.Sprintf("%s-r%d", m, r.IntN(1e6))
				l.add(&tether.Event{Type: tether.EventToolStarted, RunID: run, MessageID: m, CallID: call, Name: "slow"})
				l.add(&tether.Event{Type: tether.EventToolDelta, RunID: run, MessageID: m, CallID: call, Delta: `{"a":1}`})
			case 7:
				if waits < 2 {
					waits++
					req := fmt.Sprintf("req%d", waits)
					kind, payload := "input", `{"prompt":"Which one?"}`
					if r.IntN(2) == 0 {
						kind, payload = KindInterrupt, `{"interrupts":[{"id":"`+req+`","reason":"approval"}]}`
					}
					l.wait(run, req, kind, payload)
					if r.IntN(6) == 0 {
						l.finish(run, tether.RunAborted, `{"code":"server_restart","message":"restarted"}`)
						continue runs
					}
					l.input(run, req, `"yes"`)
				}
			case 8:
				name := fmt.Sprintf("step%d", steps%2)
				if steps%2 == 0 {
					l.add(&tether.Event{Type: tether.EventCustom, RunID: run, Name: "ag-ui.STEP_STARTED", Data: json.RawMessage(`{"type":"STEP_STARTED","stepName":"` + name + `"}`)})
				} else {
					l.add(&tether.Event{Type: tether.EventCustom, RunID: run, Name: "ag-ui.STEP_FINISHED", Data: json.RawMessage(`{"type":"STEP_FINISHED","stepName":"step0"}`)})
				}
				steps++
			case 9:
				switch r.IntN(3) {
				case 0:
					l.add(&tether.Event{Type: tether.EventCustom, RunID: run, Name: "progress", Data: json.RawMessage(`{"pct":50}`)})
				case 1:
					l.add(&tether.Event{Type: tether.EventStateSnapshot, RunID: run, State: json.RawMessage(fmt.Sprintf(`{"n":%d}`, r.IntN(9)))})
				default:
					// Refused while the state is not an object with n.
					l.try(&tether.Event{Type: tether.EventStateDelta, RunID: run, Patch: json.RawMessage(fmt.Sprintf(`[{"op":"replace","path":"/n","value":%d}]`, r.IntN(9)))})
				}
			}
		}
		if r.IntN(3) > 0 {
			l.endMsg(run, m)
		}
		if r.IntN(3) == 0 {
			whole := &tether.Message{ID: "w" + run, ThreadID: l.thread, RunID: run, Role: tether.RoleAssistant, Status: tether.MessageDone,
				Parts: []tether.Part{{Type: tether.PartReasoning, Text: "hmm"}, {Type: tether.PartText, Text: "whole answer"}}}
			l.add(&tether.Event{Type: tether.EventMessageCreated, RunID: run, MessageID: whole.ID, Message: whole})
		}
		switch r.IntN(6) {
		case 0:
			l.finish(run, tether.RunError, `{"code":"model_error","message":"The model failed."}`)
		case 1:
			l.add(&tether.Event{Type: tether.EventRunCancelRequested, RunID: run})
			l.finish(run, tether.RunCancelled, "")
		default:
			l.finish(run, tether.RunDone, "")
		}
	}
	return l
}

// verify checks frames the way a client reads them: each event decoded
// from its JSON.
func verify(t testing.TB, frames []Frame) []Event {
	t.Helper()
	v := aguitest.NewVerifier()
	var evs []Event
	for i, f := range frames {
		var e Event
		if err := json.Unmarshal(f.JSON(), &e); err != nil {
			t.Fatal(err)
		}
		if err := v.Check(e); err != nil {
			t.Fatalf("frame %d (%s): %v\n%s", i, e.Type(), err, dump(frames))
		}
		evs = append(evs, e)
	}
	return evs
}

func dump(frames []Frame) string {
	var b strings.Builder
	for _, f := range frames {
		b.Write(f.JSON())
		b.WriteByte('\n')
	}
	return b.String()
}

func reduce(evs []Event) *aguitest.Reducer {
	r := &aguitest.Reducer{}
	for _, e := range evs {
		r.Apply(e)
	}
	return r
}

// snapshotContents is contents of the AG-UI form of a snapshot.
func snapshotContents(snap *tether.Snapshot) map[string]string {
	r := &aguitest.Reducer{}
	b, _ := json.Marshal(Messages(snap.Messages))
	var msgs []map[string]any
	_ = json.Unmarshal(b, &msgs)
	r.Msgs = msgs
	return r.Contents()
}

// snapshotIDs is the order of the messages of the AG-UI form of a
// snapshot.
func snapshotIDs(snap *tether.Snapshot) []string {
	var ids []string
	for _, m := range Messages(snap.Messages) {
		ids = append(ids, m["id"].(string))
	}
	return ids
}
