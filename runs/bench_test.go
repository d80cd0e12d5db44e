package runs

import (
	"fmt"
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
