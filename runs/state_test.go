package runs

import (
	"encoding/json"
	"strings"
	"testing"
	"unsafe"

	tether "github.com/tetherhq/tether"
)

func fold(t *testing.T, s *State, evs ...*tether.Event) {
	t.Helper()
	n := 0
	if s.Offset().IsEvent() {
		_, seq, err := tether.ParseOffset(s.Offset())
		if err != nil {
			t.Fatal(err)
		}
		n = int(seq)
	}
	for i, e := range stamp(n, evs...) {
		if err := s.Apply(e); err != nil {
			t.Fatalf("event %d (%s): %v", i, e.Type, err)
		}
	}
}

func messageText(t *testing.T, s *State, id string) string {
	t.Helper()
	snap, ok := s.MessageSnapshot(id)
	if !ok {
		t.Fatalf("message %s not found", id)
	}
	var b strings.Builder
	for _, p := range snap.Messages[0].Parts {
		b.WriteString(p.Type + ":" + p.Text + p.InputText + string(p.Input) + ";")
	}
	return b.String()
}

func TestStateClone(t *testing.T) {
	s := mustFold(t, seq(streaming, []*tether.Event{
		textDelta("r1", "m1", "Hello"),
		msgStarted("r1", "m2"),
		toolStarted("r1", "m2", "c1"),
		toolDelta("r1", "m2", "c1", `{"a"`),
	})...)
	c := s.Clone()

	// The text is shared, not copied, and the clone's view of it is full.
	sp, cp := s.msgs[0].parts[0].text, c.msgs[0].parts[0].text
	if unsafe.SliceData(sp) != unsafe.SliceData(cp) {
		t.Fatal("Clone copied the text")
	}
	if cap(cp) != len(cp) {
		t.Fatalf("clone text has cap %d, len %d", cap(cp), len(cp))
	}

	fold(t, s, textDelta("r1", "m1", " world"), toolDelta("r1", "m2", "c1", `:1}`), msgUpdated("r1", "m1", `{"side":"original"}`))
	fold(t, c, textDelta("r1", "m1", " there"), toolDelta("r1", "m2", "c1", `:2}`), msgUpdated("r1", "m1", `{"side":"clone"}`),
		toolFinished("r1", "m2", "c1"), msgFinished("r1", "m1", tether.MessageDone))
	// Appends after more appends on both sides, past any spare capacity.
	for range 100 {
		fold(t, s, textDelta("r1", "m1", "s"))
		fold(t, c, textDelta("r1", "m2", "c"))
	}

	if got, want := messageText(t, s, "m1"), "text:Hello world"+strings.Repeat("s", 100)+";"; got != want {
		t.Errorf("original m1 = %q, want %q", got, want)
	}
	if got, want := messageText(t, c, "m1"), "text:Hello there;"; got != want {
		t.Errorf("clone m1 = %q, want %q", got, want)
	}
	if got, want := messageText(t, s, "m2"), `tool:{"a":1};`; got != want {
		t.Errorf("original m2 = %q, want %q", got, want)
	}
	if got, want := messageText(t, c, "m2"), `tool:{"a":2};text:`+strings.Repeat("c", 100)+";"; got != want {
		t.Errorf("clone m2 = %q, want %q", got, want)
	}
	if m, _ := s.Machine().Message("m1"); m.Status != tether.MessageRunning {
		t.Errorf("original m1 is %s", m.Status)
	}
	sm, _ := s.MessageSnapshot("m1")
	cm, _ := c.MessageSnapshot("m1")
	if string(sm.Messages[0].Metadata) != `{"side":"original"}` || string(cm.Messages[0].Metadata) != `{"side":"clone"}` {
		t.Errorf("metadata %s / %s", sm.Messages[0].Metadata, cm.Messages[0].Metadata)
	}
	// New messages and runs on one side only.
	fold(t, c, msgStarted("r1", "m3"))
	if _, ok := s.MessageSnapshot("m3"); ok {
		t.Error("a message started on the clone shows in the original")
	}
	if rs, _ := s.RunSnapshot("r1"); len(rs.Messages) != 2 {
		t.Errorf("original run has %d messages", len(rs.Messages))
	}
	if rs, _ := c.RunSnapshot("r1"); len(rs.Messages) != 3 {
		t.Errorf("clone run has %d messages", len(rs.Messages))
	}
	checkAgrees(t, s)
	checkAgrees(t, c)

	// A clone of a clone, then both go on.
	cc := c.Clone()
	fold(t, cc, textDelta("r1", "m3", "x"))
	fold(t, c, textDelta("r1", "m3", "y"))
	if messageText(t, cc, "m3") != "text:x;" || messageText(t, c, "m3") != "text:y;" {
		t.Errorf("clone of clone: %q / %q", messageText(t, cc, "m3"), messageText(t, c, "m3"))
	}
}

func TestStateOffsets(t *testing.T) {
	s := NewState(newThread())
	if s.Offset() != tether.OffsetStart {
		t.Fatalf("offset %s", s.Offset())
	}
	e := runCreated("r1")
	if err := s.Apply(e); tether.CodeOf(err) != tether.CodeBadRequest {
		t.Fatalf("no offset: %v", err)
	}
	fold(t, s, runCreated("r1"))
	again := stamp(0, custom("r1"))[0]
	if err := s.Apply(again); tether.CodeOf(err) != tether.CodeConflict {
		t.Fatalf("same offset again: %v", err)
	}
	if s.Offset() != offset(1) {
		t.Fatalf("offset %s", s.Offset())
	}
}

func TestSnapshot(t *testing.T) {
	th := newThread()
	th.Metadata = json.RawMessage(`{"title":"x"}`)
	th.Status, th.ActiveRunID = tether.ThreadError, "ignored" // derived, not taken
	s := NewState(th)
	snap := s.Snapshot()
	if snap.Thread.Status != tether.ThreadIdle || snap.Thread.ActiveRunID != "" || !snap.Thread.UpdatedAt.Equal(at(0).Time) ||
		snap.Offset != tether.OffsetStart || snap.Thread.LastOffset != tether.OffsetStart {
		t.Fatalf("empty snapshot %+v", snap)
	}
	fold(t, s, seq(streaming, []*tether.Event{runCreated("r2"), msgCreated("r2", "u2", tether.RoleUser, "next")})...)
	snap = s.Snapshot()
	if len(snap.Runs) != 2 || len(snap.Messages) != 2 || snap.Messages[0].Parts == nil || string(snap.Messages[0].Metadata) != "{}" {
		t.Fatalf("snapshot %+v", snap)
	}
	if snap.Thread.ActiveRunID != "r1" || !snap.Thread.UpdatedAt.Equal(at(5).Time) || snap.Offset != offset(5) {
		t.Fatalf("thread %+v", snap.Thread)
	}
	rs, ok := s.RunSnapshot("r2")
	if !ok || len(rs.Runs) != 1 || rs.Runs[0].ID != "r2" || len(rs.Messages) != 1 || rs.Messages[0].ID != "u2" || rs.Offset != offset(5) {
		t.Fatalf("run snapshot %+v", rs)
	}
	if _, ok := s.RunSnapshot("r9"); ok {
		t.Fatal("snapshot of an unknown run")
	}
	ms, ok := s.MessageSnapshot("m1")
	if !ok || len(ms.Runs) != 1 || ms.Runs[0].ID != "r1" || len(ms.Messages) != 1 || ms.Messages[0].ID != "m1" {
		t.Fatalf("message snapshot %+v", ms)
	}
	if _, ok := s.MessageSnapshot("m9"); ok {
		t.Fatal("snapshot of an unknown message")
	}
}

func TestFinalAnswer(t *testing.T) {
	s := NewState(newThread())
	fa, ok := s.FinalAnswer("")
	if !ok || *fa != (tether.FinalAnswer{Offset: tether.OffsetStart}) {
		t.Fatalf("no runs: %+v %v", fa, ok)
	}
	fold(t, s, runCreated("r1"), msgCreated("r1", "u1", tether.RoleUser, "question"), runStarted("r1"))
	fa, _ = s.FinalAnswer("")
	if fa.RunID != "r1" || fa.MessageID != "" || fa.Content != "" || fa.Complete || fa.Status != "running" {
		t.Fatalf("no answer yet: %+v", fa)
	}
	fold(t, s, msgStarted("r1", "a1"), textDelta("r1", "a1", "draft"), msgFinished("r1", "a1", tether.MessageDone),
		msgStarted("r1", "a2"), reasoningDelta("r1", "a2", "hmm"), textDelta("r1", "a2", "The "),
		toolStarted("r1", "a2", "c1"), textDelta("r1", "a2", "answer"), reasoningDelta("r1", "a2", "ok"), textDelta("r1", "a2", "."))
	fa, _ = s.FinalAnswer("r1")
	if fa.MessageID != "a2" || fa.Content != "The answer." || fa.Complete || !fa.CompletedAt.IsZero() {
		t.Fatalf("streaming: %+v", fa)
	}
	if fa.Offset != s.Offset() {
		t.Fatalf("answer as of %s, state at %s", fa.Offset, s.Offset())
	}
	fold(t, s, with(msgStarted("r1", "t1"), func(e *tether.Event) { e.Role = tether.RoleTool }), runFinished("r1", tether.RunDone))
	fa, _ = s.FinalAnswer("")
	if fa.MessageID != "a2" || fa.Content != "The answer." || !fa.Complete || fa.Status != "done" || fa.CompletedAt.IsZero() {
		t.Fatalf("done: %+v", fa)
	}
	fold(t, s, runCreated("r2"))
	fa, _ = s.FinalAnswer("")
	if fa.RunID != "r2" || fa.Content != "" || fa.Complete || fa.Status != "pending" {
		t.Fatalf("latest run: %+v", fa)
	}
	if fa, _ = s.FinalAnswer("r1"); fa.Content != "The answer." {
		t.Fatalf("named run: %+v", fa)
	}
	if _, ok := s.FinalAnswer("r9"); ok {
		t.Fatal("answer of an unknown run")
	}
}

// TestLongMessage folds a message of 20k deltas: the parts hold all the
// text, and appending does not copy it again and again.
func TestLongMessage(t *testing.T) {
	s := mustFold(t, streaming...)
	evs := make([]*tether.Event, 20000)
	for i := range evs {
		evs[i] = textDelta("r1", "m1", "0123456789")
	}
	fold(t, s, evs...)
	p := s.msgs[0].parts
	if len(p) != 1 || len(p[0].text) != 200000 {
		t.Fatalf("%d parts, %d bytes", len(p), len(p[0].text))
	}
	if cap(p[0].text) > 2*len(p[0].text)+4096 {
		t.Fatalf("cap %d for %d bytes", cap(p[0].text), len(p[0].text))
	}
}

func TestToolInput(t *testing.T) {
	cases := []struct {
		name   string
		deltas []string
		input  string // of tool.finished
		want   string
	}{
		{"streamed JSON", []string{`{"a":`, ` [1, 2]}`}, "", `{"a": [1, 2]}`},
		{"streamed broken JSON", []string{`{"a":`}, "", `"{\"a\":"`},
		{"streamed text", []string{`hello`}, "", `"hello"`},
		{"nothing streamed", nil, "", ``},
		{"explicit input wins", []string{`{"a":1}`}, `{"b":2}`, `{"b":2}`},
		{"explicit null", []string{`{"a":1}`}, `null`, `null`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustFold(t, withTool...)
			for _, d := range c.deltas {
				fold(t, s, toolDelta("r1", "m1", "c1", d))
			}
			fold(t, s, with(toolFinished("r1", "m1", "c1"), func(e *tether.Event) { e.Input = json.RawMessage(c.input) }))
			p := s.msgs[0].parts[0]
			if string(p.x.input) != c.want || len(p.text) != 0 || p.x.status != tether.ToolDone {
				t.Fatalf("input %s, input_text %q, status %s; want input %s", p.x.input, p.text, p.x.status, c.want)
			}
		})
	}
}
