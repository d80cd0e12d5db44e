package agui

import (
	"encoding/json"
	"testing"

	tether "github.com/tetherhq/tether"
)

// FuzzRunAgentInput: no body makes the parser or what is derived from it
// panic, and every refusal is a bad_request or conflict *tether.Error.
func FuzzRunAgentInput(f *testing.F) {
	f.Add([]byte(httpAgentBody))
	f.Add([]byte(`{"threadId":"t1","runId":"r","resume":[{"interruptId":"q1","status":"resolved","payload":1}]}`))
	f.Add([]byte(`{"threadId":"t1","runId":"r","messages":[{"id":"x","role":"user","content":[{"type":"text","text":"a"}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := ParseRunAgentInput(body)
		if err != nil {
			if tether.CodeOf(err) != tether.CodeBadRequest {
				t.Fatalf("%v", err)
			}
			return
		}
		if !json.Valid(in.RunMetadata()) {
			t.Fatalf("metadata %s", in.RunMetadata())
		}
		msgs, err := in.NewMessages(func(m InputMessage) bool { return len(m.ID)%2 == 0 })
		if err != nil && tether.CodeOf(err) != tether.CodeBadRequest {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if !tether.ValidID(m.ID) || !m.Role.Valid() {
				t.Fatalf("input %+v", m)
			}
		}
		for _, req := range []*tether.Request{{ID: "q1", Kind: "input"}, {ID: "q1", Kind: KindInterrupt, Payload: json.RawMessage(`{"interrupts":[{"id":"q1"}]}`)}} {
			a, err := ResumeAnswer(req, in.Resume)
			if err != nil && tether.CodeOf(err) != tether.CodeConflict {
				t.Fatal(err)
			}
			if err == nil && !a.Cancel && !json.Valid(a.Value) {
				t.Fatalf("value %s", a.Value)
			}
		}
	})
}

// FuzzProject: whatever events a projector is given, even ones no log
// could hold, after any prefix of a real run, it does not panic and every
// frame is valid JSON. (That real logs project to valid AG-UI streams from
// every offset is TestJoinAtEveryOffset's.)
func FuzzProject(f *testing.F) {
	f.Add(3, []byte(`[{"type":"text.delta","run_id":"r1","message_id":"zz","delta":"x"}]`))
	f.Add(0, []byte(`[{"type":"tool.finished","run_id":"r1","message_id":"m1","call_id":"c","output":1},{"type":"run.finished","run_id":"r1","status":"done"}]`))
	f.Add(9, []byte(`[{"type":"run.waiting","run_id":"nope"},{"type":"custom","run_id":"r1","name":"ag-ui.STEP_FINISHED","data":{"type":"STEP_FINISHED"}}]`))
	base := newLog(f, "t1")
	demoRun(base, true)
	f.Fuzz(func(t *testing.T, at int, events []byte) {
		var evs []*tether.Event
		if json.Unmarshal(events, &evs) != nil {
			return
		}
		at = int(uint(at) % uint(len(base.events)+1))
		p := New("t1", Options{})
		frames := p.Join(base.snaps[at])
		for i, e := range evs {
			if e == nil {
				continue
			}
			e.Offset = tether.FormatOffset(2, uint64(i+1))
			frames = append(frames, p.Event(e)...)
		}
		for _, fr := range frames {
			if !json.Valid(fr.JSON()) {
				t.Fatalf("frame %v", fr.Event)
			}
		}
	})
}
