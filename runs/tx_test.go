package runs

import (
	"fmt"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
)

// machineWith returns a machine with evs committed in one Tx.
func machineWith(t testing.TB, evs ...*tether.Event) *Machine {
	t.Helper()
	m := NewMachine(tid)
	tx := m.Begin()
	for i, e := range stamp(0, evs...) {
		if err := tx.Apply(e); err != nil {
			t.Fatalf("event %d (%s): %v", i, e.Type, err)
		}
	}
	tx.Commit()
	return m
}

func TestTxAtomicity(t *testing.T) {
	m := machineWith(t, streaming...)
	before := dump(m)
	batch := func(third *tether.Event) []*tether.Event {
		return stamp(3, textDelta("r1", "m1", "a"), toolStarted("r1", "m1", "c1"), third,
			msgFinished("r1", "m1", tether.MessageDone), runFinished("r1", tether.RunDone))
	}

	tx := m.Begin()
	evs := batch(textDelta("r1", "m9", "x"))
	for i, e := range evs {
		err := tx.Apply(e)
		if i == 2 {
			if tether.CodeOf(err) != tether.CodeBadRequest {
				t.Fatalf("event 3: %v, want bad_request", err)
			}
			break
		}
		if err != nil {
			t.Fatalf("event %d: %v", i+1, err)
		}
	}
	// Earlier events of the Tx stay applied in it, and only in it.
	if info, _ := tx.Message("m1"); info.Status != tether.MessageRunning {
		t.Fatalf("tx sees m1 %s", info.Status)
	}
	if tx.m.msgs["m1"].tools != nil {
		t.Fatal("the machine's message got the Tx's tool call")
	}
	if ms := tx.msg("m1"); len(ms.tools) != 1 {
		t.Fatalf("tx sees tools %v", ms.tools)
	}
	// Dropped without Commit: the machine is as before.
	if got := dump(m); got != before {
		t.Fatalf("dropped Tx changed the machine:\n%s\nwant\n%s", got, before)
	}

	tx = m.Begin()
	for i, e := range batch(textDelta("r1", "m1", "b")) {
		if err := tx.Apply(e); err != nil {
			t.Fatalf("event %d: %v", i+1, err)
		}
	}
	if r, _ := m.Run("r1"); r.Status != tether.RunRunning {
		t.Fatalf("before Commit the machine sees r1 %s", r.Status)
	}
	if r, _ := tx.Run("r1"); r.Status != tether.RunDone {
		t.Fatalf("the Tx sees r1 %s", r.Status)
	}
	if tx.ThreadStatus() != tether.ThreadIdle || m.ThreadStatus() != tether.ThreadBusy {
		t.Fatalf("thread: tx %s, machine %s", tx.ThreadStatus(), m.ThreadStatus())
	}
	tx.Commit()
	tx.Commit() // a second Commit does nothing
	r, _ := m.Run("r1")
	if r.Status != tether.RunDone || !r.LastUpdateAt.Equal(at(8).Time) {
		t.Fatalf("after Commit r1 is %s, last update %v", r.Status, r.LastUpdateAt)
	}
	if info, _ := m.Message("m1"); info.Status != tether.MessageDone {
		t.Fatalf("after Commit m1 is %s", info.Status)
	}
	if got := m.msgs["m1"].tools; len(got) != 1 || got[0].status != tether.ToolDone {
		t.Fatalf("after Commit tools %v", got)
	}
	if m.ThreadStatus() != tether.ThreadIdle {
		t.Fatalf("thread %s", m.ThreadStatus())
	}
}

func TestTxChanged(t *testing.T) {
	m := machineWith(t, seq(running, []*tether.Event{runCreated("r2")})...)
	tx := m.Begin()
	for _, e := range stamp(4, custom("r2"), runCreated("r3"), msgStarted("r1", "m1"), custom("r2"), runFinished("r3", tether.RunCancelled)) {
		if err := tx.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for _, r := range tx.Changed() {
		ids = append(ids, fmt.Sprintf("%s:%s", r.ID, r.Status))
	}
	if got, want := strings.Join(ids, ","), "r2:pending,r3:cancelled,r1:running"; got != want {
		t.Fatalf("Changed = %s, want %s", got, want)
	}
	if tx.ActiveRunID() != "r1" || m.LatestRunID() != "r2" {
		t.Fatalf("active %s latest %s", tx.ActiveRunID(), m.LatestRunID())
	}
	tx.Commit()
	if m.LatestRunID() != "r3" || len(m.Runs()) != 3 {
		t.Fatalf("latest %s, %d runs", m.LatestRunID(), len(m.Runs()))
	}
	if got := m.Begin().Changed(); len(got) != 0 {
		t.Fatalf("a new Tx has changed %v", got)
	}
}

func TestTxStale(t *testing.T) {
	m := machineWith(t, streaming...)
	a, b := m.Begin(), m.Begin()
	if err := a.Apply(textDelta("r1", "m1", "x")); err != nil {
		t.Fatal(err)
	}
	a.Commit()
	mustPanic(t, "Apply after Commit", func() { _ = a.Apply(textDelta("r1", "m1", "x")) })
	mustPanic(t, "Apply on a stale Tx", func() { _ = b.Apply(textDelta("r1", "m1", "x")) })
	mustPanic(t, "Commit of a stale Tx", func() { b.Commit() })

	s := mustFold(t, streaming...)
	c := s.Machine().Begin()
	if err := s.Apply(stamp(3, textDelta("r1", "m1", "x"))[0]); err != nil {
		t.Fatal(err)
	}
	mustPanic(t, "Commit after the State folded", func() { c.Commit() })
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

// TestTxCost checks that a Tx copies only what its events touch, however
// large the thread.
func TestTxCost(t *testing.T) {
	evs := []*tether.Event{runCreated("r1"), runStarted("r1")}
	for i := range 10000 {
		id := fmt.Sprintf("m%d", i)
		evs = append(evs, msgStarted("r1", id), msgFinished("r1", id, tether.MessageDone))
	}
	evs = append(evs, msgStarted("r1", "last"))
	m := machineWith(t, evs...)
	tx := m.Begin()
	for range 10 {
		if err := tx.Apply(textDelta("r1", "last", "x")); err != nil {
			t.Fatal(err)
		}
	}
	if len(tx.msgs) != 1 || len(tx.runs) != 1 {
		t.Fatalf("overlay holds %d messages and %d runs", len(tx.msgs), len(tx.runs))
	}
	allocs := testing.AllocsPerRun(20, func() {
		tx := m.Begin()
		for range 10 {
			_ = tx.Apply(textDelta("r1", "last", "x"))
		}
	})
	// Begin, two maps with a copy each, the touched list: a constant.
	if allocs > 20 {
		t.Fatalf("a 10-event Tx on a 10k-message thread makes %v allocations", allocs)
	}
}

func TestMachineClone(t *testing.T) {
	m := machineWith(t, seq(withTool, []*tether.Event{runCreated("r2")})...)
	c := m.Clone()
	if dump(c) != dump(m) {
		t.Fatalf("clone differs:\n%s\n%s", dump(c), dump(m))
	}
	before := dump(m)
	tx := c.Begin()
	for _, e := range stamp(5, toolFinished("r1", "m1", "c1"), toolStarted("r1", "m1", "c2"), msgStarted("r1", "m2"),
		msgFinished("r1", "m1", tether.MessageDone), runFinished("r1", tether.RunError), runStarted("r2")) {
		if err := tx.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	tx.Commit()
	if got := dump(m); got != before {
		t.Fatalf("changing the clone changed the original:\n%s\nwant\n%s", got, before)
	}
	cloned := dump(c)
	tx = m.Begin()
	for _, e := range stamp(5, toolStarted("r1", "m1", "c3"), msgStarted("r1", "m3"), runFinished("r2", tether.RunCancelled)) {
		if err := tx.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	tx.Commit()
	if got := dump(c); got != cloned {
		t.Fatalf("changing the original changed the clone:\n%s\nwant\n%s", got, cloned)
	}
	if got := strings.Join(m.RunningMessages("r1"), ","); got != "m1,m3" {
		t.Fatalf("original running %s", got)
	}
	if got := m.msgs["m1"].tools; len(got) != 2 || got[1].callID != "c3" {
		t.Fatalf("original tools %v", got)
	}
	if got := c.msgs["m1"].tools; len(got) != 2 || got[1].callID != "c2" {
		t.Fatalf("clone tools %v", got)
	}
}

func TestRunCopies(t *testing.T) {
	ev := with(runCreated("r1"), func(e *tether.Event) {
		e.Run.Input.Messages = []tether.InputMessage{{Role: tether.RoleUser, Content: "hi"}}
	})
	m := machineWith(t, ev, runStarted("r1"), runWaiting("r1", "q1"))
	r, _ := m.Run("r1")
	r.Request.ID = "changed"
	r.Input.Messages[0].Content = "changed"
	r2, _ := m.Run("r1")
	if r2.Request.ID != "q1" || r2.Input.Messages[0].Content != "hi" {
		t.Fatalf("a copy wrote into the machine: %+v", r2)
	}
}
