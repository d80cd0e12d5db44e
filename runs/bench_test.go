package runs

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
)

// BenchmarkApplyTextDelta folds text.delta events into a State: the hot
// path of every streamed token.
func BenchmarkApplyTextDelta(b *testing.B) {
	s := mustFold(b, streaming...)
	const chunk = 4096
	evs := make([]tether.Event, chunk)
	next := 3
	b.ReportAllocs()
	b.SetBytes(8)
	for i := 0; i < b.N; i++ {
		j := i % chunk
		if j == 0 {
			// Offsets must grow, so events are made ahead, off the clock.
			b.StopTimer()
			for k := range evs {
				next++
				evs[k] = tether.Event{Type: tether.EventTextDelta, RunID: "r1", MessageID: "m1", Delta: "token ",
					TS: at(next), Offset: offset(next)}
			}
			b.StartTimer()
		}
		if err := s.Apply(&evs[j]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTxApply validates 10-event batches on a speculative Machine,
// as the engine does for each append.
func BenchmarkTxApply(b *testing.B) {
	m := machineWith(b, streaming...)
	batch := stamp(3, textDelta("r1", "m1", "a"), reasoningDelta("r1", "m1", "b"), textDelta("r1", "m1", "c"),
		msgUpdated("r1", "m1", `{"k":1}`), textDelta("r1", "m1", "d"), custom("r1"), textDelta("r1", "m1", "e"),
		textDelta("r1", "m1", "f"), textDelta("r1", "m1", "g"), textDelta("r1", "m1", "h"))
	b.ReportAllocs()
	for b.Loop() {
		tx := m.Begin()
		for _, e := range batch {
			if err := tx.Apply(e); err != nil {
				b.Fatal(err)
			}
		}
		tx.Commit()
	}
}

// threadOf returns a State of n finished messages of 3 parts each.
func threadOf(b *testing.B, n int) *State {
	evs := []*tether.Event{runCreated("r1"), runStarted("r1")}
	for i := range n {
		id := fmt.Sprintf("m%d", i)
		evs = append(evs, msgStarted("r1", id), reasoningDelta("r1", id, "thinking about it"),
			textDelta("r1", id, "an answer of some length, as answers go"), toolStarted("r1", id, "c1"),
			toolDelta("r1", id, "c1", `{"q":"x"}`), toolFinished("r1", id, "c1"), msgFinished("r1", id, tether.MessageDone))
	}
	return mustFold(b, evs...)
}

func BenchmarkClone(b *testing.B) {
	s := threadOf(b, 1000)
	b.ReportAllocs()
	for b.Loop() {
		s.Clone()
	}
}

func BenchmarkMachineClone(b *testing.B) {
	m := threadOf(b, 1000).Machine()
	b.ReportAllocs()
	for b.Loop() {
		m.Clone()
	}
}

func BenchmarkSnapshot(b *testing.B) {
	s := threadOf(b, 1000)
	b.ReportAllocs()
	for b.Loop() {
		s.Snapshot()
	}
}

// BenchmarkApplyStateDelta folds state.delta events into a thread whose
// state is about size bytes (an array of objects and a counter): a delta
// costs a scan of the state, not a decoding of it. replace changes the
// counter and a member of the first item; append adds to the array (which
// so grows by up to 1024 items during the benchmark).
func BenchmarkApplyStateDelta(b *testing.B) {
	for _, c := range []struct {
		name  string
		size  int
		patch string
	}{
		{"replace/state=1KiB", 1 << 10, `[{"op":"replace","path":"/count","value":2},{"op":"replace","path":"/items/0/title","value":"x"}]`},
		{"replace/state=10KiB", 10 << 10, `[{"op":"replace","path":"/count","value":2},{"op":"replace","path":"/items/0/title","value":"x"}]`},
		{"replace/state=100KiB", 100 << 10, `[{"op":"replace","path":"/count","value":2},{"op":"replace","path":"/items/0/title","value":"x"}]`},
		{"append/state=100KiB", 100 << 10, `[{"op":"add","path":"/items/-","value":{"id":0,"title":"new"}}]`},
	} {
		size := c.size
		b.Run(c.name, func(b *testing.B) {
			items := make([]string, 0, size/32)
			for len(items)*32 < size {
				items = append(items, fmt.Sprintf(`{"id":%d,"title":"item number %06d"}`, len(items), len(items)))
			}
			doc := `{"items":[` + strings.Join(items, ",") + `],"count":1}`
			s := mustFold(b, runCreated("r1"), runStarted("r1"),
				&tether.Event{Type: tether.EventStateSnapshot, RunID: "r1", State: json.RawMessage(doc)})
			patch := json.RawMessage(c.patch)
			const chunk = 1024
			evs := make([]tether.Event, chunk)
			next := 3
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				j := i % chunk
				if j == 0 {
					b.StopTimer()
					// Start again from the snapshot, so that an append
					// grows the state by at most one chunk.
					s = mustFold(b, runCreated("r1"), runStarted("r1"),
						&tether.Event{Type: tether.EventStateSnapshot, RunID: "r1", State: json.RawMessage(doc)})
					next = 3
					for k := range evs {
						next++
						evs[k] = tether.Event{Type: tether.EventStateDelta, RunID: "r1", Patch: patch, TS: at(next), Offset: offset(next)}
					}
					b.StartTimer()
				}
				if err := s.Apply(&evs[j]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWideThread folds, as one batch, a thread of n items of a shape
// (messages open at once in one run, runs pending at once, tool calls in
// one message, tool parts of one complete message): what one large append
// of such a thread costs.
func BenchmarkWideThread(b *testing.B) {
	for _, shape := range []string{"open messages", "pending runs", "tool calls", "tool parts"} {
		for _, n := range []int{2500, 10000} {
			evs := wideThread(shape, n)
			b.Run(fmt.Sprintf("shape=%s/n=%d", strings.ReplaceAll(shape, " ", "_"), n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					tx := NewMachine(tid).Begin()
					for _, e := range evs {
						if err := tx.Apply(e); err != nil {
							b.Fatal(err)
						}
					}
					tx.Commit()
				}
			})
		}
	}
}

// BenchmarkMetadataUpdates folds into a State n message.updated events
// that each add a key to one message's metadata.
func BenchmarkMetadataUpdates(b *testing.B) {
	for _, n := range []int{2000, 8000} {
		evs := wideThread("metadata updates", n)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s := NewState(newThread())
				for _, e := range evs {
					if err := s.Apply(e); err != nil {
						b.Fatal(err)
					}
				}
				s.Snapshot() // writes the metadata out once
			}
		})
	}
}

// BenchmarkStateDeltas checks, as one batch, n state.delta events that
// each add a key to the thread's state.
func BenchmarkStateDeltas(b *testing.B) {
	for _, n := range []int{2000, 8000} {
		evs := wideThread("state deltas", n)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tx := NewMachine(tid).Begin()
				for _, e := range evs {
					if err := tx.Apply(e); err != nil {
						b.Fatal(err)
					}
				}
				tx.Commit()
				tx.m.State() // written out once
			}
		})
	}
}

// BenchmarkStateDeltaPerAppend appends one small state.delta per batch (a
// Tx each, as one append of one event) to a thread whose state is of a
// given size: what checking an append costs, including the bounds on the
// state's size and depth, should not grow with the state.
func BenchmarkStateDeltaPerAppend(b *testing.B) {
	for _, size := range []int{64 << 10, 4 << 20} {
		for _, op := range []string{"add", "copy", "move-deeper"} {
			b.Run(fmt.Sprintf("%s/state=%dKiB", op, size>>10), func(b *testing.B) {
				items := make([]string, 0, size/40)
				for len(items)*40 < size {
					items = append(items, fmt.Sprintf(`{"id":%d,"title":"item number %06d","x":{}}`, len(items), len(items)))
				}
				doc := `{"items":[` + strings.Join(items, ",") + `],"a":{"b":{"c":[1,2,3]}},"d":{"e":{}}}`
				s := mustFold(b, runCreated("r1"), runStarted("r1"),
					&tether.Event{Type: tether.EventStateSnapshot, RunID: "r1", State: json.RawMessage(doc)})
				m := s.Machine().Clone()
				patches := map[string][]string{
					"add":         {`[{"op":"add","path":"/items/7/x/k","value":{"n":[1,2]}}]`, `[{"op":"remove","path":"/items/7/x/k"}]`},
					"copy":        {`[{"op":"copy","from":"/a","path":"/items/7/x/k"}]`, `[{"op":"remove","path":"/items/7/x/k"}]`},
					"move-deeper": {`[{"op":"move","from":"/a","path":"/d/e/a"}]`, `[{"op":"move","from":"/d/e/a","path":"/a"}]`},
				}[op]
				next := 3
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					next++
					tx := m.Begin()
					e := tether.Event{Type: tether.EventStateDelta, RunID: "r1", Patch: json.RawMessage(patches[i%2]), TS: at(next), Offset: offset(next)}
					if err := tx.Apply(&e); err != nil {
						b.Fatal(err)
					}
					tx.Commit()
				}
			})
		}
	}
}
