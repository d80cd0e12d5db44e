package runs

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	tether "github.com/tetherhq/tether"
)

// FuzzStateApply folds arbitrary events. Whatever they are, folding never
// panics, a State, a Tx and a clone taken half way all agree, and the
// exported snapshot says what the machine says.
func FuzzStateApply(f *testing.F) {
	files, _ := filepath.Glob("testdata/reduce/*.json")
	more, _ := filepath.Glob("testdata/machine/*.json")
	for _, name := range append(files, more...) {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		var v struct{ Events json.RawMessage }
		if err := json.Unmarshal(data, &v); err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(v.Events))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var evs []*tether.Event
		if err := json.Unmarshal(data, &evs); err != nil {
			return
		}
		foldAndCheck(t, evs)
	})
}

// TestRandomSequences folds random but mostly plausible event sequences,
// which reach deeper into the state machine than mutated JSON does, and
// checks the same properties as FuzzStateApply.
func TestRandomSequences(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 1500
	if testing.Short() {
		n = 300
	}
	accepted := 0
	for range n {
		evs := randomEvents(rng, 5+rng.IntN(60))
		accepted += foldAndCheck(t, evs)
		if t.Failed() {
			for i, e := range evs {
				b, _ := json.Marshal(e)
				t.Logf("%d %s", i, b)
			}
			t.FailNow()
		}
	}
	t.Logf("%d events accepted", accepted)
}

func randomEvents(rng *rand.Rand, n int) []*tether.Event {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	run := func() string { return pick("r1", "r2", "r3") }
	msg := func() string { return pick("m1", "m2", "m3", "m4") }
	call := func() string { return pick("c1", "c2") }
	evs := make([]*tether.Event, n)
	for i := range evs {
		r := run()
		var e *tether.Event
		switch rng.IntN(18) {
		case 0:
			e = runCreated(r)
		case 1:
			e = runStarted(r)
			e.Attempt = rng.IntN(3)
		case 2, 3:
			e = msgStarted(r, msg())
		case 4, 5:
			e = textDelta(r, msg(), pick("", "a", "bc"))
		case 6:
			e = reasoningDelta(r, msg(), pick("x", "yz"))
		case 7:
			e = toolStarted(r, msg(), call())
		case 8:
			e = toolDelta(r, msg(), call(), pick(`{"a":`, `1}`, `x`))
		case 9:
			e = toolFinished(r, msg(), call())
			e.Error = json.RawMessage(pick(``, `null`, `"boom"`))
		case 10:
			e = msgUpdated(r, msg(), pick(`{"a":1}`, `{"a":null,"b":{"c":2}}`))
		case 11:
			e = msgFinished(r, msg(), tether.MessageStatus(pick("done", "error", "aborted")))
		case 12:
			if rng.IntN(2) == 0 {
				e = runWaiting(r, pick("q1", "q2"))
			} else {
				e = runInput(r, pick("q1", "q2"))
			}
		case 13:
			e = msgCreated(r, msg(), tether.RoleUser, "hi")
		case 14:
			e = cancelRequested(r)
		case 15:
			e = &tether.Event{Type: tether.EventStateSnapshot, RunID: r, State: json.RawMessage(pick(`null`, `{"n":[]}`, `"s"`))}
		case 16:
			e = &tether.Event{Type: tether.EventStateDelta, RunID: r, Patch: json.RawMessage(pick(
				`[{"op":"add","path":"/n/-","value":1}]`, `[{"op":"remove","path":"/n/0"}]`,
				`[{"op":"replace","path":"","value":{"n":[2]}}]`, `[{"op":"test","path":"/n","value":[]}]`, `{}`))}
		default:
			e = runFinished(r, tether.RunStatus(pick("done", "error", "cancelled", "aborted")))
		}
		e.TS = at(i + 1)
		evs[i] = e
	}
	return evs
}

// foldAndCheck folds evs with a State, with one Tx per event, and with a
// clone of the State taken half way, and checks that all agree and that
// the snapshot agrees with the machine. It returns the number of events
// accepted.
func foldAndCheck(t *testing.T, evs []*tether.Event) int {
	t.Helper()
	s := NewState(newThread())
	m := NewMachine(tid)
	var clone *State
	var rest []*tether.Event
	accepted := 0
	for i, e := range evs {
		if e == nil {
			continue
		}
		// The store, not the events, decides offsets.
		e.Offset = tether.FormatOffset(1, uint64(i+1))
		tx := m.Begin()
		txErr := tx.Apply(e)
		err := s.Apply(e)
		if (err == nil) != (txErr == nil) {
			t.Fatalf("event %d: State says %v, Tx says %v", i, err, txErr)
		}
		if err != nil {
			if c := tether.CodeOf(err); c != tether.CodeBadRequest && c != tether.CodeConflict {
				t.Fatalf("event %d: code %s: %v", i, c, err)
			}
			continue
		}
		accepted++
		tx.Commit()
		if clone != nil {
			rest = append(rest, e)
		} else if i >= len(evs)/2 {
			clone = s.Clone()
		}
	}
	checkAgrees(t, s)
	if got, want := dump(m), dump(s.Machine()); got != want {
		t.Fatalf("Tx machine and State machine differ:\n%s\n%s", got, want)
	}
	if clone != nil {
		for _, e := range rest {
			if err := clone.Apply(e); err != nil {
				t.Fatalf("clone rejects %s: %v", e.Type, err)
			}
		}
		if a, b := snapshotJSON(t, clone), snapshotJSON(t, s); a != b {
			t.Fatalf("clone and original differ:\n%s\n%s", a, b)
		}
	}
	return accepted
}

// checkAgrees checks that a State's snapshot agrees with its machine and
// that the machine's invariants hold.
func checkAgrees(t testing.TB, s *State) {
	t.Helper()
	m := s.Machine()
	snap := s.Snapshot()
	if _, err := json.Marshal(snap); err != nil {
		t.Fatalf("snapshot does not encode: %v", err)
	}
	th := snap.Thread
	if th.Status != m.ThreadStatus() || th.ActiveRunID != m.ActiveRunID() {
		t.Fatalf("thread %s/%q, machine %s/%q", th.Status, th.ActiveRunID, m.ThreadStatus(), m.ActiveRunID())
	}
	if th.LastOffset != s.Offset() || snap.Offset != s.Offset() {
		t.Fatalf("offsets %s %s, want %s", th.LastOffset, snap.Offset, s.Offset())
	}
	if len(snap.Runs) != len(m.order) {
		t.Fatalf("%d runs, machine has %d", len(snap.Runs), len(m.order))
	}
	var active, pending []string
	for i, r := range snap.Runs {
		mr, ok := m.Run(r.ID)
		if !ok || m.order[i] != r.ID || mr.Status != r.Status {
			t.Fatalf("run %s: snapshot %s, machine %s (%v)", r.ID, r.Status, mr.Status, ok)
		}
		switch {
		case r.Status.Active():
			active = append(active, r.ID)
		case r.Status == tether.RunPending:
			pending = append(pending, r.ID)
		}
		if (r.Status == tether.RunWaiting) != (r.Request != nil) {
			t.Fatalf("run %s is %s with request %v", r.ID, r.Status, r.Request)
		}
		var running []string
		for _, msg := range snap.Messages {
			if msg.RunID == r.ID && !msg.Status.Terminal() {
				running = append(running, msg.ID)
			}
		}
		if got := m.RunningMessages(r.ID); !slices.Equal(got, running) && len(got)+len(running) > 0 {
			t.Fatalf("run %s: running messages %v, snapshot %v", r.ID, got, running)
		}
		if r.Status.Terminal() && len(running) > 0 {
			t.Fatalf("run %s is %s with running messages %v", r.ID, r.Status, running)
		}
	}
	if len(active) > 1 || (len(active) == 1) != (m.th.active != "") || !slices.Equal(pending, m.th.pending) && len(pending)+len(m.th.pending) > 0 {
		t.Fatalf("active %v pending %v, machine %+v", active, pending, m.th)
	}
	if len(snap.Messages) != len(m.msgs) {
		t.Fatalf("%d messages, machine has %d", len(snap.Messages), len(m.msgs))
	}
	for _, msg := range snap.Messages {
		info, ok := m.Message(msg.ID)
		if !ok || info.Status != msg.Status || info.RunID != msg.RunID || info.Role != msg.Role {
			t.Fatalf("message %s: snapshot %+v, machine %+v", msg.ID, msg, info)
		}
		if msg.Parts == nil {
			t.Fatalf("message %s has nil parts", msg.ID)
		}
		tools := m.msgs[msg.ID].tools
		k := 0
		for _, p := range msg.Parts {
			if p.Type != tether.PartTool {
				continue
			}
			if k >= len(tools) || tools[k].callID != p.CallID || tools[k].status != p.Status {
				t.Fatalf("message %s: tool part %s is %s, machine has %v", msg.ID, p.CallID, p.Status, tools)
			}
			if msg.Status.Terminal() && p.Status == tether.ToolRunning {
				t.Fatalf("message %s is %s with running tool call %s", msg.ID, msg.Status, p.CallID)
			}
			k++
		}
		if k != len(tools) {
			t.Fatalf("message %s: %d tool parts, machine has %d", msg.ID, k, len(tools))
		}
	}
}
