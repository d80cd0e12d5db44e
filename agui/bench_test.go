package agui

import (
	"testing"

	tether "github.com/tetherhq/tether"
)

// BenchmarkProject is the cost of projecting one text.delta of a running
// message and encoding its frame, per subscriber (frames are per stream).
func BenchmarkProject(b *testing.B) {
	l := newLog(b, "t1")
	l.createRun("r1", `{"ag_ui":{"runId":"x"}}`)
	l.started("r1")
	l.msg("r1", "m1")
	l.text("r1", "m1", "first ")
	e := &tether.Event{Offset: tether.FormatOffset(1, 1<<40), Type: tether.EventTextDelta, RunID: "r1", MessageID: "m1", Delta: "word "}
	p := New("t1", Options{})
	for _, ev := range l.events {
		p.Event(ev)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, f := range p.Event(e) {
			_ = f.SSE()
		}
	}
}

// BenchmarkJoin is the cost of a join prelude of a thread of 50 finished
// runs and one running, each a demo-like answer.
func BenchmarkJoin(b *testing.B) {
	l := newLog(b, "t1")
	for i := range 51 {
		run := "r" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		l.createRun(run, `{}`, tether.InputMessage{ID: "u" + run, Role: tether.RoleUser, Content: "question"})
		l.started(run)
		l.msg(run, "m"+run)
		l.reasoning(run, "m"+run, "thinking about it")
		l.tool(run, "m"+run, "c"+run, "search", []string{`{"q":"x"}`}, `{"results":[1,2,3]}`)
		for range 40 {
			l.text(run, "m"+run, "word ")
		}
		if i < 50 {
			l.endMsg(run, "m"+run)
			l.finish(run, tether.RunDone, "")
		}
	}
	snap := l.snaps[len(l.snaps)-1]
	b.ReportAllocs()
	for b.Loop() {
		for _, f := range New("t1", Options{}).Join(snap) {
			_ = f.SSE()
		}
	}
}
