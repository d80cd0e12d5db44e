package runs

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
)

const tid = "t1"

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func at(n int) tether.Time { return tether.At(t0.Add(time.Duration(n) * time.Second)) }

func offset(n int) tether.Offset { return tether.FormatOffset(1, uint64(n)) }

func newThread() tether.Thread {
	return tether.Thread{ID: tid, Metadata: json.RawMessage(`{}`), CreatedAt: at(0)}
}

func runCreated(id string) *tether.Event {
	return &tether.Event{Type: tether.EventRunCreated, RunID: id,
		Run: &tether.Run{ID: id, ThreadID: tid, Agent: "demo", Status: tether.RunPending}}
}

func runStarted(id string) *tether.Event {
	return &tether.Event{Type: tether.EventRunStarted, RunID: id, WorkerID: "w1"}
}

func msgCreated(run, id string, role tether.Role, text string) *tether.Event {
	return &tether.Event{Type: tether.EventMessageCreated, RunID: run, Message: &tether.Message{
		ID: id, Role: role, Parts: []tether.Part{{Type: tether.PartText, Text: text}},
	}}
}

func msgStarted(run, id string) *tether.Event {
	return &tether.Event{Type: tether.EventMessageStarted, RunID: run, MessageID: id, Role: tether.RoleAssistant}
}

func textDelta(run, msg, d string) *tether.Event {
	return &tether.Event{Type: tether.EventTextDelta, RunID: run, MessageID: msg, Delta: d}
}

func reasoningDelta(run, msg, d string) *tether.Event {
	return &tether.Event{Type: tether.EventReasoningDelta, RunID: run, MessageID: msg, Delta: d}
}

func toolStarted(run, msg, call string) *tether.Event {
	return &tether.Event{Type: tether.EventToolStarted, RunID: run, MessageID: msg, CallID: call, Name: "tool"}
}

func toolDelta(run, msg, call, d string) *tether.Event {
	return &tether.Event{Type: tether.EventToolDelta, RunID: run, MessageID: msg, CallID: call, Delta: d}
}

func toolFinished(run, msg, call string) *tether.Event {
	return &tether.Event{Type: tether.EventToolFinished, RunID: run, MessageID: msg, CallID: call}
}

func msgUpdated(run, msg, meta string) *tether.Event {
	return &tether.Event{Type: tether.EventMessageUpdated, RunID: run, MessageID: msg, Metadata: json.RawMessage(meta)}
}

func msgFinished(run, msg string, st tether.MessageStatus) *tether.Event {
	return &tether.Event{Type: tether.EventMessageFinished, RunID: run, MessageID: msg, Status: string(st)}
}

func runWaiting(run, req string) *tether.Event {
	return &tether.Event{Type: tether.EventRunWaiting, RunID: run, Request: &tether.Request{ID: req, Kind: "approval"}}
}

func runInput(run, req string) *tether.Event {
	return &tether.Event{Type: tether.EventRunInput, RunID: run, RequestID: req, Value: json.RawMessage(`true`)}
}

func custom(run string) *tether.Event {
	return &tether.Event{Type: tether.EventCustom, RunID: run, Name: "note"}
}

func cancelRequested(run string) *tether.Event {
	return &tether.Event{Type: tether.EventRunCancelRequested, RunID: run}
}

func runFinished(run string, st tether.RunStatus) *tether.Event {
	return &tether.Event{Type: tether.EventRunFinished, RunID: run, Status: string(st)}
}

// with returns a copy of e changed by f, so that tables can share bases.
func with(e *tether.Event, f func(*tether.Event)) *tether.Event {
	c := *e
	if e.Run != nil {
		r := *e.Run
		c.Run = &r
	}
	if e.Message != nil {
		m := *e.Message
		m.Parts = append([]tether.Part(nil), e.Message.Parts...)
		c.Message = &m
	}
	f(&c)
	return &c
}

func seq(parts ...[]*tether.Event) []*tether.Event {
	var out []*tether.Event
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// stamp returns copies of evs with ts and offset set from n+1 on, as the
// store would commit them after n events.
func stamp(n int, evs ...*tether.Event) []*tether.Event {
	out := make([]*tether.Event, len(evs))
	for i, e := range evs {
		c := *e
		c.TS, c.Offset = at(n+i+1), offset(n+i+1)
		out[i] = &c
	}
	return out
}

// mustFold returns a State with evs applied, failing the test on any error.
func mustFold(t testing.TB, evs ...*tether.Event) *State {
	t.Helper()
	s := NewState(newThread())
	for i, e := range stamp(0, evs...) {
		if err := s.Apply(e); err != nil {
			t.Fatalf("event %d (%s): %v", i, e.Type, err)
		}
	}
	return s
}

// dump renders everything a Machine holds, deterministically, so that
// tests can compare machines.
func dump(m *Machine) string {
	var b strings.Builder
	fmt.Fprintf(&b, "thread %s order=%v th=%+v state=%s\n", m.threadID, m.order, m.th, m.State())
	ids := make([]string, 0, len(m.runs))
	for id := range m.runs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := m.runs[id]
		j, _ := json.Marshal(r.run)
		fmt.Fprintf(&b, "run %s %s running=%v answers=%x\n", id, j, r.running, r.answers)
	}
	ids = ids[:0]
	for id := range m.msgs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		ms := *m.msgs[id]
		// What a Machine derives to go faster is not part of its state.
		ms.ownTools, ms.calls, ms.indexed = false, nil, 0
		fmt.Fprintf(&b, "msg %s %+v\n", id, ms)
	}
	return b.String()
}

func snapshotJSON(t testing.TB, s *State) string {
	t.Helper()
	b, err := json.Marshal(s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
