package aisdk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/runs"
)

// vector is a golden vector of the reducer (runs/testdata/reduce): a
// thread and its events. They are the corpus of the consistency tests.
type vector struct {
	Name   string            `json:"name"`
	Thread json.RawMessage   `json:"thread"`
	Events []json.RawMessage `json:"events"`
}

func loadVectors(t testing.TB) map[string][]*tether.Event {
	files, err := filepath.Glob("../runs/testdata/reduce/*.json")
	if err != nil || len(files) < 8 {
		t.Fatalf("want the reducer's vectors, found %d (%v)", len(files), err)
	}
	out := map[string][]*tether.Event{}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var v vector
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var evs []*tether.Event
		for _, raw := range v.Events {
			var e tether.Event
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			evs = append(evs, &e)
		}
		out[strings.TrimSuffix(filepath.Base(name), ".json")] = evs
	}
	return out
}

// fold returns the state after evs.
func fold(t testing.TB, evs []*tether.Event) *runs.State {
	t.Helper()
	s := runs.NewState(tether.Thread{ID: "t1", Status: tether.ThreadIdle, LastOffset: tether.OffsetStart})
	for i, e := range evs {
		if err := s.Apply(e); err != nil {
			t.Fatalf("event %d (%s): %v", i, e.Type, err)
		}
	}
	return s
}

// runsOf returns the runs the events create, in order.
func runsOf(evs []*tether.Event) []tether.Run {
	var out []tether.Run
	for _, e := range evs {
		if e.Type == tether.EventRunCreated {
			out = append(out, *e.Run)
		}
	}
	return out
}

// live returns the chunks of a run's events streamed from its start.
func live(run tether.Run, evs []*tether.Event) []Chunk {
	s := NewStream(run)
	var out []Chunk
	for _, e := range evs {
		out = append(out, s.Event(e)...)
	}
	return out
}

// build applies chunks to an empty message, checking on the way that each
// is one useChat accepts where it comes (see checker).
func build(t testing.TB, chunks []Chunk) (UIMessage, bool) {
	t.Helper()
	var m UIMessage
	var ck checker
	started := false
	for i, c := range chunks {
		if err := ck.check(c); err != nil {
			t.Fatalf("chunk %d %s: %v\nchunks: %s", i, c.Type, err, dump(chunks))
		}
		started = started || c.Type == ChunkStart
		Apply(&m, c)
	}
	return m, started
}

// normal is a message with what may differ between a stream and the
// snapshot's rebuild set aside: a request's part once answered or given
// up (the snapshot keeps only an open request), a text or reasoning part split in
// two by a waiting point (the reducer keeps one), and, while a request is
// open, where its part stands (the snapshot cannot tell: it comes last)
// and whether the parts an agent streamed while waiting are open, and
// the steps of a message that asked; and,
// while the run goes on (running), whether its last text part is open;
// and the input of the calls in late (lateCalls).
func normal(m UIMessage, running, asked bool, late map[string]bool) string {
	var parts []UIPart
	var open *UIPart
	for i, p := range m.Parts {
		if late[p.ToolCallID] {
			p.Input, p.RawInput = nil, ""
		}
		if p.State == StateApprovalRequested && partAfter(m.Parts[i:]) {
			// An open approval of a call that parts followed (an agent
			// streamed while it waited): its input was made available
			// where the stream stood, which a snapshot cannot tell.
			p.Input, p.RawInput = nil, ""
		}
		switch p.State {
		case StateOutput, StateOutputError:
			// An approved call (or one whose approval was open when it
			// ended) keeps its approval in useChat; the snapshot knows
			// the call's end only.
			p.Approval = nil
		case StateApprovalResponded, StateInputStreaming, StateInputAvailable:
			if p.Type != "dynamic-tool" && late[p.ToolCallID] {
				// Its approval answered, the call still running: rebuilt,
				// a running call (the snapshot keeps no answered request).
				p.State, p.Approval = "pending", nil
			}
		}
		if p.Type == "dynamic-tool" && (p.State == StateOutput || p.State == StateOutputError) {
			continue
		}
		if asked && p.Type == "step-start" {
			// What follows a request is a new step on the stream; the
			// snapshot does not know where the request stood.
			continue
		}
		if p.Type == "dynamic-tool" && p.State == StateInputAvailable {
			open = &p
			continue
		}
		if n := len(parts); n > 0 && (p.Type == "text" || p.Type == "reasoning") && parts[n-1].Type == p.Type && parts[n-1].ID == p.ID {
			parts[n-1].Text += p.Text
			parts[n-1].State = p.State
			continue
		}
		parts = append(parts, p)
	}
	if open != nil || running {
		for i := range parts {
			if parts[i].Type == "text" || parts[i].Type == "reasoning" {
				parts[i].State = ""
			}
		}
	}
	if open != nil {
		parts = append(parts, *open)
	}
	m.Parts = parts
	b, _ := json.Marshal(m)
	return string(b)
}

// partAfter reports whether a part follows the first of parts, other
// than a step's start and a request's part once answered (set aside).
func partAfter(parts []UIPart) bool {
	for _, p := range parts[1:] {
		if p.Type != "step-start" && !(p.Type == "dynamic-tool" && (p.State == StateOutput || p.State == StateOutputError)) {
			return true
		}
	}
	return false
}

// lateCalls returns the tool calls of a stream that ended in a later step
// than their part's: useChat updates the part of a tool-input-available
// in the current step only, so such a call gets its output alone, and its
// part keeps the input streamed into it (docs/ai-sdk.md, "Caveats"); and
// the calls whose approval was answered that are still running (the
// snapshot keeps no answered request: rebuilt, they are running calls).
func lateCalls(chunks []Chunk) map[string]bool {
	late, given, responded := map[string]bool{}, map[string]bool{}, map[string]bool{}
	approvals := map[string]string{} // approval id → call id
	for _, c := range chunks {
		switch c.Type {
		case ChunkStartStep:
			for id := range given {
				given[id] = false
			}
		case ChunkToolInputStart:
			// A call of another message of the run may have the id.
			given[c.ToolCallID] = false
		case ChunkToolInputAvailable:
			given[c.ToolCallID] = true
		case ChunkToolApprovalRequest:
			approvals[c.ApprovalID] = c.ToolCallID
		case ChunkToolApprovalResponse:
			responded[approvals[c.ApprovalID]] = true
		case ChunkToolOutput, ChunkToolOutputError, ChunkToolOutputDenied:
			responded[c.ToolCallID] = false
			if !given[c.ToolCallID] {
				late[c.ToolCallID] = true
			}
		}
	}
	for id, r := range responded {
		if r {
			late[id] = true
		}
	}
	return late
}

// asked reports whether a message showed a request (on either side of a
// comparison: a rebuild after the answer has none), as a dynamic tool part
// or a call's approval.
func asked(ms ...UIMessage) bool {
	for _, m := range ms {
		for _, p := range m.Parts {
			if p.Type == "dynamic-tool" || p.Approval != nil {
				return true
			}
		}
	}
	return false
}

func dump(chunks []Chunk) string {
	var b bytes.Buffer
	for _, c := range chunks {
		j, _ := json.Marshal(c)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestThreeViewsAgree: for every vector of the reducer and every run in
// it, the UI message of the live stream, of a stream rebuilt from the
// snapshot after any prefix of the log and continued live, and of
// Messages on the final snapshot are the same message (with the same id:
// else useChat would show the answer twice).
func TestThreeViewsAgree(t *testing.T) {
	for name, evs := range loadVectors(t) {
		t.Run(name, func(t *testing.T) {
			final := fold(t, evs).Snapshot()
			listed := map[string]UIMessage{}
			for _, m := range Messages(final) {
				listed[m.ID] = m
			}
			for _, run := range runsOf(evs) {
				whole, started := build(t, live(run, evs))
				late := lateCalls(live(run, evs))
				all := NewStream(run)
				for _, e := range evs {
					all.Event(e)
				}
				ended := all.Ended()
				if !started {
					for id := range listed {
						if strings.HasPrefix(id, run.ID) {
							t.Errorf("run %s: no start on the stream, but Messages lists %s", run.ID, id)
						}
					}
					continue
				}
				if got, ok := listed[whole.ID]; !ok {
					t.Errorf("run %s: Messages has no message %s", run.ID, whole.ID)
				} else if normal(got, !ended, asked(got, whole), late) != normal(whole, !ended, asked(got, whole), late) {
					t.Errorf("run %s: Messages and the live stream differ\nmessages: %s\nlive:     %s", run.ID, normal(got, !ended, asked(got, whole), late), normal(whole, !ended, asked(got, whole), late))
				}
				for k := 0; k <= len(evs); k++ {
					snap, ok := fold(t, evs[:k]).RunSnapshot(run.ID)
					if !ok {
						continue
					}
					chunks, s := Prelude(snap)
					for _, e := range evs[k:] {
						chunks = append(chunks, s.Event(e)...)
					}
					got, _ := build(t, chunks)
					if s.Ended() != ended {
						t.Errorf("run %s, rebuilt after %d events: ended %v, live %v", run.ID, k, s.Ended(), ended)
					}
					if normal(got, !ended, asked(got, whole), late) != normal(whole, !ended, asked(got, whole), late) {
						t.Errorf("run %s, rebuilt after %d events, then live:\ngot:  %s\nwant: %s", run.ID, k, normal(got, !ended, asked(got, whole), late), normal(whole, !ended, asked(got, whole), late))
					}
				}
			}
		})
	}
}

// TestResumeFromEveryOffset: a stream cut after any event and resumed
// from that event's offset (the chunks of the events after it, on a
// projection folded up to it, as the server resumes) gives, joined to
// what came before the cut, the chunks of the uncut stream, byte for byte.
func TestResumeFromEveryOffset(t *testing.T) {
	for name, evs := range loadVectors(t) {
		t.Run(name, func(t *testing.T) {
			for _, run := range runsOf(evs) {
				want := dump(live(run, evs))
				for k := 0; k <= len(evs); k++ {
					before := NewStream(run)
					var got []Chunk
					for _, e := range evs[:k] {
						got = append(got, before.Event(e)...)
					}
					resumed := NewStream(run)
					for _, e := range evs[:k] {
						resumed.Event(e) // folded, not sent
					}
					for _, e := range evs[k:] {
						got = append(got, resumed.Event(e)...)
					}
					if dump(got) != want {
						t.Fatalf("run %s cut after %d events:\ngot:\n%s\nwant:\n%s", run.ID, k, dump(got), want)
					}
				}
			}
		})
	}
}

// checker checks a sequence of chunks against the rules useChat's stream
// processing enforces (ai 7.0.173, processUIMessageStream): deltas and
// ends only for open parts, tool chunks only for known calls, nothing
// after the terminal chunk, one start.
type checker struct {
	open      map[string]string // part id → "text" | "reasoning"
	calls     map[string]bool
	approvals map[string]bool // approval ids asked
	starts    int
	ended     bool
	waited    bool // the terminal chunk was a waiting point's
}

func (ck *checker) check(c Chunk) error {
	if ck.open == nil {
		ck.open, ck.calls, ck.approvals = map[string]string{}, map[string]bool{}, map[string]bool{}
	}
	if ck.ended {
		if !ck.waited {
			return fmt.Errorf("after the terminal chunk")
		}
		// After a waiting point: the answer's own stream, on top of the
		// message the one before built, with no part open.
		ck.ended, ck.waited = false, false
		clear(ck.open)
	}
	b, err := json.Marshal(c)
	if err != nil || !json.Valid(b) {
		return fmt.Errorf("does not encode: %v", err)
	}
	switch c.Type {
	case ChunkStart:
		ck.starts++
		if ck.starts > 1 {
			return fmt.Errorf("a second start")
		}
	case ChunkTextStart, ChunkReasoningStart:
		ck.open[c.ID] = strings.TrimSuffix(c.Type, "-start")
	case ChunkTextDelta, ChunkReasoningDelta, ChunkTextEnd, ChunkReasoningEnd:
		kind := strings.TrimSuffix(strings.TrimSuffix(c.Type, "-delta"), "-end")
		if ck.open[c.ID] != kind {
			return fmt.Errorf("%s for missing %s part %q", c.Type, kind, c.ID)
		}
		if strings.HasSuffix(c.Type, "-end") {
			delete(ck.open, c.ID)
		}
	case ChunkToolInputStart, ChunkToolInputAvailable:
		ck.calls[c.ToolCallID] = true
	case ChunkToolInputDelta, ChunkToolOutput, ChunkToolOutputError, ChunkToolOutputDenied:
		if !ck.calls[c.ToolCallID] {
			return fmt.Errorf("no tool invocation %q", c.ToolCallID)
		}
	case ChunkToolApprovalRequest:
		if !ck.calls[c.ToolCallID] || c.ApprovalID == "" {
			return fmt.Errorf("no tool invocation %q to approve (approval %q)", c.ToolCallID, c.ApprovalID)
		}
		ck.approvals[c.ApprovalID] = true
	case ChunkToolApprovalResponse:
		if !ck.approvals[c.ApprovalID] {
			return fmt.Errorf("no tool invocation for approval %q", c.ApprovalID)
		}
	case ChunkFinish, ChunkAbort:
		ck.ended = true
		ck.waited = c.FinishReason == FinishToolCalls
	}
	return nil
}
