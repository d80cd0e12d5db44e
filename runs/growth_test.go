package runs

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
)

// allocated returns the bytes f allocates on the heap.
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// wideThread returns the events of a thread of a given shape with n of its
// repeated item: messages open at once in one run, runs pending at once,
// tool calls in one message, metadata updates of one message, deltas of
// the thread's state, tool parts of one message.created.
func wideThread(shape string, n int) []*tether.Event {
	var evs []*tether.Event
	switch shape {
	case "open messages":
		evs = append(evs, runCreated("r1"), runStarted("r1"))
		for i := range n {
			evs = append(evs, msgStarted("r1", fmt.Sprintf("m%d", i)))
		}
		for i := range n {
			evs = append(evs, msgFinished("r1", fmt.Sprintf("m%d", i), tether.MessageDone))
		}
	case "pending runs":
		for i := range n {
			evs = append(evs, runCreated(fmt.Sprintf("r%d", i)))
		}
		for i := range n {
			id := fmt.Sprintf("r%d", i)
			evs = append(evs, runStarted(id), runFinished(id, tether.RunDone))
		}
	case "tool calls":
		evs = append(evs, runCreated("r1"), runStarted("r1"), msgStarted("r1", "m"))
		for i := range n {
			evs = append(evs, toolStarted("r1", "m", fmt.Sprintf("c%d", i)))
		}
		for i := range n {
			evs = append(evs, toolFinished("r1", "m", fmt.Sprintf("c%d", i)))
		}
	case "metadata updates": // a key each, in one message
		evs = append(evs, runCreated("r1"), runStarted("r1"), msgStarted("r1", "m"))
		for i := range n {
			evs = append(evs, msgUpdated("r1", "m", fmt.Sprintf(`{"key_%06d":"some value of a few words"}`, i)))
		}
	case "state deltas": // a key each
		evs = append(evs, runCreated("r1"), runStarted("r1"),
			&tether.Event{Type: tether.EventStateSnapshot, RunID: "r1", State: json.RawMessage(`{"keys":{}}`)})
		for i := range n {
			evs = append(evs, &tether.Event{Type: tether.EventStateDelta, RunID: "r1",
				Patch: json.RawMessage(fmt.Sprintf(`[{"op":"add","path":"/keys/key_%06d","value":"some value of a few words"}]`, i))})
		}
	case "tool parts": // one complete message
		msg := &tether.Message{ID: "m", Role: tether.RoleAssistant, Parts: make([]tether.Part, n)}
		for i := range n {
			msg.Parts[i] = tether.Part{Type: tether.PartTool, CallID: fmt.Sprintf("call_%08d", i), Name: "tool"}
		}
		evs = append(evs, runCreated("r1"), runStarted("r1"),
			&tether.Event{Type: tether.EventMessageCreated, RunID: "r1", Message: msg})
	}
	return stamp(0, evs...)
}

// TestFoldGrowsLinearly folds threads of n and 4n items three ways (the
// committed State, one Tx for the whole thread as a single large append,
// one Tx per event as a worker appending one event at a time) and checks
// that the bytes allocated grow about 4 times, not 16: a thread's shape
// within the limits must not make each event cost more than the one
// before.
func TestFoldGrowsLinearly(t *testing.T) {
	folds := map[string]func(testing.TB, []*tether.Event){
		"state": func(t testing.TB, evs []*tether.Event) {
			s := NewState(newThread())
			for _, e := range evs {
				if err := s.Apply(e); err != nil {
					t.Fatal(err)
				}
			}
		},
		"one batch": func(t testing.TB, evs []*tether.Event) {
			tx := NewMachine(tid).Begin()
			for _, e := range evs {
				if err := tx.Apply(e); err != nil {
					t.Fatal(err)
				}
			}
			tx.Commit()
		},
		"a batch per event": func(t testing.TB, evs []*tether.Event) {
			m := NewMachine(tid)
			for _, e := range evs {
				tx := m.Begin()
				if err := tx.Apply(e); err != nil {
					t.Fatal(err)
				}
				tx.Commit()
			}
		},
	}
	const n = 1000
	for _, shape := range []string{"open messages", "pending runs", "tool calls", "metadata updates", "state deltas"} {
		small, large := wideThread(shape, n), wideThread(shape, 4*n)
		for name, fold := range folds {
			a := allocated(func() { fold(t, small) })
			b := allocated(func() { fold(t, large) })
			t.Logf("%s, %s: %d items %d KiB, %d items %d KiB", shape, name, n, a>>10, 4*n, b>>10)
			if b > 8*a {
				t.Errorf("%s, %s: 4 times the items allocate %.1f times the bytes (%d KiB, then %d KiB): more than linear",
					shape, name, float64(b)/float64(a), a>>10, b>>10)
			}
		}
	}
}

// TestSharedListsStayApart: the lists a Machine shares with its clones and
// its Tx (pending runs, a run's running messages) are appended to in place;
// an append on one holder must never show in another.
func TestSharedListsStayApart(t *testing.T) {
	// Three of each, so that both lists have room past their end (cap 4).
	base := []*tether.Event{runCreated("r1"), runStarted("r1"), msgStarted("r1", "a"), msgStarted("r1", "a2"),
		msgStarted("r1", "a3"), runCreated("r2"), runCreated("r3"), runCreated("r4")}
	s := mustFold(t, base...)
	c := s.Clone()
	for _, e := range stamp(len(base), msgStarted("r1", "b"), runCreated("r5")) {
		if err := s.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range stamp(len(base), msgStarted("r1", "x"), runCreated("rx")) {
		if err := c.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, got []string, want ...string) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	pending := func(runs []tether.Run) (ids []string) {
		for _, r := range runs {
			if r.Status == tether.RunPending {
				ids = append(ids, r.ID)
			}
		}
		return ids
	}
	check("state, running", s.Machine().RunningMessages("r1"), "a", "a2", "a3", "b")
	check("clone, running", c.Machine().RunningMessages("r1"), "a", "a2", "a3", "x")

	// Two Tx begun on the same machine (with room past the lists' end),
	// the first dropped.
	m := mustFold(t, base...).Machine()
	n := len(base)
	t1, t2 := m.Begin(), m.Begin()
	for _, e := range stamp(n, msgStarted("r1", "t1"), runCreated("t1r")) {
		if err := t1.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range stamp(n, msgStarted("r1", "t2"), runCreated("t2r")) {
		if err := t2.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	check("first Tx, pending", pending(t1.Unfinished()), "r2", "r3", "r4", "t1r")
	// run.finished ends the first Tx's running messages: "t1", not "t2".
	if err := t1.Apply(stamp(n+2, runFinished("r1", tether.RunDone))[0]); err != nil {
		t.Fatal(err)
	}
	if mi, _ := t1.Message("t1"); mi.Status != tether.MessageDone {
		t.Errorf("first Tx: message t1 is %s after its run finished, want done", mi.Status)
	}
	check("second Tx, pending", pending(t2.Unfinished()), "r2", "r3", "r4", "t2r")
	t2.Commit()
	check("after commit, running", m.RunningMessages("r1"), "a", "a2", "a3", "t2")
	t3 := m.Begin()
	for _, e := range stamp(n+2, msgStarted("r1", "t3"), runCreated("t3r")) {
		if err := t3.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	check("after commit, machine", m.RunningMessages("r1"), "a", "a2", "a3", "t2")
	check("third Tx, pending", pending(t3.Unfinished()), "r2", "r3", "r4", "t2r", "t3r")
	check("state after all, running", s.Machine().RunningMessages("r1"), "a", "a2", "a3", "b")
	check("clone after all, running", c.Machine().RunningMessages("r1"), "a", "a2", "a3", "x")
}

// TestSharedToolCallsStayApart: a message's tool calls are shared by a
// Machine, its clones and its Tx, appended to in place and indexed by a map
// the Tx shares; a status changed or a call added on one holder must never
// show in another.
func TestSharedToolCallsStayApart(t *testing.T) {
	const calls = 2 * fewTools // past the index's threshold
	base := []*tether.Event{runCreated("r1"), runStarted("r1"), msgStarted("r1", "m")}
	for i := range calls {
		base = append(base, toolStarted("r1", "m", fmt.Sprintf("c%d", i)))
	}
	n := len(base)
	// probe tells what a tool.delta of call says on m: nil while the
	// call runs, else its error.
	probe := func(m *Machine, call string) string {
		err := m.Begin().Apply(stamp(n+10, toolDelta("r1", "m", call, "x"))[0])
		if err == nil {
			return "running"
		}
		return err.Error()
	}
	apply := func(tx *Tx, at int, evs ...*tether.Event) {
		t.Helper()
		for _, e := range stamp(at, evs...) {
			if err := tx.Apply(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := func(what, got, want string) {
		t.Helper()
		if !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", what, got, want)
		}
	}

	// A call finished first, so that the state owns its calls when cloned.
	s := mustFold(t, append(base, toolFinished("r1", "m", fmt.Sprintf("c%d", calls-1)))...)
	c := s.Clone()
	for _, e := range stamp(n+1, toolFinished("r1", "m", "c0"), toolStarted("r1", "m", "new")) {
		if err := s.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	status := func(st *State, call string) string {
		for _, p := range st.Snapshot().Messages[0].Parts {
			if p.CallID == call {
				return p.Status
			}
		}
		return "not found"
	}
	want("state's snapshot, c0", status(s, "c0"), tether.ToolDone)
	want("state's snapshot, c1", status(s, "c1"), tether.ToolRunning)
	want("state's snapshot, new", status(s, "new"), tether.ToolRunning)
	want("clone's snapshot, c0", status(c, "c0"), tether.ToolRunning)
	want("clone's snapshot, new", status(c, "new"), "not found")
	want("clone, c0", probe(c.Machine(), "c0"), "running")
	want("clone, new", probe(c.Machine(), "new"), "not found")
	want("state, c0", probe(s.Machine(), "c0"), "is finished")
	want("state, new", probe(s.Machine(), "new"), "running")

	m := mustFold(t, base...).Machine()
	t1, t2 := m.Begin(), m.Begin()
	apply(t1, n, toolFinished("r1", "m", "c1"), toolStarted("r1", "m", "x"), toolStarted("r1", "m", "y"))
	apply(t2, n, toolStarted("r1", "m", "y"), toolFinished("r1", "m", "c2"))
	// Each Tx still sees its own calls, whatever the other added.
	apply(t1, n+3, toolDelta("r1", "m", "x", "."), toolDelta("r1", "m", "y", "."), toolDelta("r1", "m", "c2", "."))
	want("first Tx, c1", t1.Apply(stamp(n+6, toolDelta("r1", "m", "c1", "."))[0]).Error(), "is finished")
	apply(t2, n+2, toolDelta("r1", "m", "y", "."), toolDelta("r1", "m", "c1", "."))
	want("second Tx, x", t2.Apply(stamp(n+4, toolDelta("r1", "m", "x", "."))[0]).Error(), "not found")
	t2.Commit()
	want("after commit, c1", probe(m, "c1"), "running")
	want("after commit, c2", probe(m, "c2"), "is finished")
	want("after commit, x", probe(m, "x"), "not found")
	want("after commit, y", probe(m, "y"), "running")
	t3 := m.Begin()
	apply(t3, n+10, toolStarted("r1", "m", "x"), toolDelta("r1", "m", "x", "."), msgFinished("r1", "m", tether.MessageDone))
	want("before the third Tx commits, c1", probe(m, "c1"), "running")
	t3.Commit()
	want("after the third Tx, c1", probe(m, "c1"), "message m is finished")
}

// TestMetaTreeIsMergePatch: message.updated's patches merged in a tree give
// byte for byte what MergePatch gives, one patch after the other.
func TestMetaTreeIsMergePatch(t *testing.T) {
	for _, c := range []struct {
		target  string
		patches []string
	}{
		{`{"a":"b"}`, []string{`{"a":"c"}`, `{"b":"c"}`, `{"a":null}`, `{"a":1}`}},
		{`{"a":{"b":"c"}}`, []string{`{"a":{"b":"d","c":null}}`, `{"a":{"e":{"f":null,"g":[1,{"h":null}]}}}`, `{"a":{"e":{"g":null}}}`}},
		{`{"e":null}`, []string{`{"a":1}`, `{"e":{"x":1}}`, `{"e":null}`, `{"e":2}`}},
		{` { "a" : { "x" : 1 } , "b" : [ 1 , 2 ] } `, []string{` { "a" : { "y" : 2 } } `, `{"b":{"c":null,"d":" x "}}`}},
		{`{"a":1,"a":2}`, []string{`{"b":3,"b":4}`, `{"a":null,"c":{"d":1,"d":{"e":2}}}`}},
		{`{"a\"<b>":1}`, []string{`{"c":"\u00e9","\u0064":2}`, `{"a\"<b>":null,"d":null}`}},
		{`{}`, []string{`{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{"ccc":1}}}`, `{"a":[]}`, `{"a":{"x":[]}}`}},
		{`{"a":"x"}`, []string{`{}`, `{"a":{}}`, `{"a":{"b":{}}}`, `{"a":{"b":{"c":true}}}`}},
	} {
		tree := newMetaTree(json.RawMessage(c.target))
		want := json.RawMessage(c.target)
		for i, p := range c.patches {
			want = MergePatch(want, json.RawMessage(p))
			tree.merge(json.RawMessage(p))
			if got := tree.encode(); string(got) != string(want) {
				t.Errorf("%s, patch %d (%s): %s, MergePatch gives %s", c.target, i, p, got, want)
			}
			if i%2 == 1 { // written out and read again, as a Clone does
				tree = newMetaTree(tree.encode())
			}
		}
	}
}

// TestPatchedMetadataStaysApart: metadata patched in a tree is written out
// for a clone, a snapshot and an encoding, and later patches of the state
// do not show in a clone taken before them.
func TestPatchedMetadataStaysApart(t *testing.T) {
	base := []*tether.Event{runCreated("r1"), runStarted("r1"), msgStarted("r1", "m"),
		msgUpdated("r1", "m", `{"a":1}`), msgUpdated("r1", "m", `{"b":{"c":2}}`)}
	s := mustFold(t, base...)
	c := s.Clone()
	for _, e := range stamp(len(base), msgUpdated("r1", "m", `{"b":{"d":3},"a":null}`)) {
		if err := s.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	meta := func(st *State) string { return string(st.Snapshot().Messages[0].Metadata) }
	if got, want := meta(c), `{"a":1,"b":{"c":2}}`; got != want {
		t.Errorf("clone: %s, want %s", got, want)
	}
	if got, want := meta(s), `{"b":{"c":2,"d":3}}`; got != want {
		t.Errorf("state: %s, want %s", got, want)
	}
	for _, e := range stamp(len(base)+1, msgUpdated("r1", "m", `{"e":4}`)) {
		if err := s.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	enc, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	d, err := DecodeState(enc)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := meta(d), `{"b":{"c":2,"d":3},"e":4}`; got != want {
		t.Errorf("decoded: %s, want %s", got, want)
	}
}

// TestStateWorkStaysApart: the tree of the thread's state, kept from one
// state.delta to the next and lent by a Machine to its Tx, never shows a
// patch of a Tx dropped, of another Tx, or one that failed halfway.
func TestStateWorkStaysApart(t *testing.T) {
	delta := func(patch string) *tether.Event {
		return &tether.Event{Type: tether.EventStateDelta, RunID: "r1", Patch: json.RawMessage(patch)}
	}
	add := func(key string) *tether.Event {
		return delta(fmt.Sprintf(`[{"op":"add","path":"/%s","value":1}]`, key))
	}
	base := []*tether.Event{runCreated("r1"), runStarted("r1"),
		{Type: tether.EventStateSnapshot, RunID: "r1", State: json.RawMessage(`{"s":0}`)}}
	n := len(base)
	m := NewMachine(tid)
	apply := func(tx *Tx, evs ...*tether.Event) {
		t.Helper()
		for _, e := range stamp(n, evs...) {
			if err := tx.Apply(e); err != nil {
				t.Fatal(err)
			}
		}
		n += len(evs)
	}
	want := func(what string, got json.RawMessage, w string) {
		t.Helper()
		if string(got) != w {
			t.Errorf("%s: %s, want %s", what, got, w)
		}
	}
	tx := m.Begin()
	apply(tx, base...)
	tx.Commit()
	tx = m.Begin()
	apply(tx, add("x"), delta(`[]`), delta(`[]`)) // 3 patches: room for a 4th
	tx.Commit()                                   // m's state is now a tree, unwritten

	a, b := m.Begin(), m.Begin()
	apply(a, add("a"))
	apply(b, add("b"))
	// A failed patch builds the first Tx's tree again from its patches.
	if err := a.Apply(stamp(n, delta(`[{"op":"remove","path":"/nothing"}]`))[0]); tether.CodeOf(err) != tether.CodeConflict {
		t.Fatalf("a patch that does not apply: %v, want conflict", err)
	}
	want("first Tx", a.State(), `{"s":0,"x":1,"a":1}`)
	want("second Tx", b.State(), `{"s":0,"x":1,"b":1}`)
	b.Commit() // a is dropped
	want("after the second Tx", m.State(), `{"s":0,"x":1,"b":1}`)

	tx = m.Begin()
	apply(tx, add("c"))
	err := tx.Apply(stamp(n, delta(`[{"op":"add","path":"/d","value":1},{"op":"test","path":"/d","value":2}]`))[0])
	if tether.CodeOf(err) != tether.CodeConflict {
		t.Fatalf("a patch whose test fails: %v, want conflict", err)
	}
	apply(tx, add("e"))
	tx.Commit()
	want("after a patch that failed halfway", m.State(), `{"s":0,"x":1,"b":1,"c":1,"e":1}`)

	// A State folds deltas into its own tree; a clone keeps the state as
	// it was.
	s := mustFold(t, append(base, add("x"), add("y"))...)
	c := s.Clone()
	for _, e := range stamp(len(base)+2, add("z")) {
		if err := s.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	want("clone", c.Snapshot().State, `{"s":0,"x":1,"y":1}`)
	want("state", s.Snapshot().State, `{"s":0,"x":1,"y":1,"z":1}`)
}
