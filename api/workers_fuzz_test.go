package api_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	tether "github.com/tetherhq/tether"
)

// FuzzAppendEvents sends arbitrary batches, with arbitrary producer
// headers, to a claimed run over HTTP, as a worker would: the API's
// decoding, the producer check and the state machine's validation (the
// fold itself is fuzzed in runs). Whatever is sent: no server fault; an
// error has the body and code of §1; a 200 appended exactly the batch, in
// order, at the end of the log; anything else appended nothing; a retry
// of an accepted idempotent append is a 204 that appends nothing; and the
// thread still folds.
func FuzzAppendEvents(f *testing.F) {
	for _, s := range []string{
		`[{"type":"message.started","message_id":"m1","role":"assistant"},{"type":"text.delta","message_id":"m1","delta":"hi"},{"type":"message.finished","message_id":"m1","status":"done"}]`,
		`[{"type":"message.started","message_id":"m1","role":"assistant"},{"type":"tool.started","message_id":"m1","call_id":"c1","name":"s"},{"type":"tool.delta","message_id":"m1","call_id":"c1","delta":"{"},{"type":"tool.finished","message_id":"m1","call_id":"c1","output":null,"error":null}]`,
		`[{"type":"run.finished","status":"done"}]`,
		`[{"type":"run.finished","status":"aborted"}]`,
		`[{"type":"run.started"}]`,
		`[{"type":"run.waiting","request":{"id":"q1","kind":"confirm"}}]`,
		`[{"type":"message.updated","message_id":"u1","metadata":{"x":1}}]`,
		`[{"type":"message.created","message":{"id":"m2","role":"assistant","parts":[{"type":"text","text":"x"}]}}]`,
		`[{"type":"custom","name":"n","data":{"a":[1]},"run_id":"run_x"}]`,
		`[{"type":"custom","name":"n","offset":"1"}]`,
		`[]`, `{}`, `[null]`, `[{"type":"custom","name":"n"}] x`,
	} {
		f.Add([]byte(s), "p1", "0", "0")
		f.Add([]byte(s), "", "", "")
	}
	f.Add([]byte(`[{"type":"custom","name":"n"}]`), "p1", "1", "0")
	f.Add([]byte(`[{"type":"custom","name":"n"}]`), "p1", "0", "1")
	f.Add([]byte(`[{"type":"custom","name":"n"}]`), "p1", "00", "9007199254740992")
	v := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, body []byte, pid, epoch, seq string) {
		sendable(t, pid, epoch, seq)
		tid, rid, lease := v.claimed(t)
		before := v.log(t, tid)
		hdr := []string{"Tether-Lease", lease, "Producer-Id", pid, "Producer-Epoch", epoch, "Producer-Seq", seq}
		r := v.do(t, "POST", "/v1/runs/"+rid+"/events", body, hdr...)
		checkError(t, "append", r)
		after := v.log(t, tid)
		if !slices.EqualFunc(before, after[:min(len(before), len(after))], func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
			t.Fatalf("the log before the append changed")
		}
		added := after[len(before):]
		switch r.status {
		case 200:
			evs, err := tether.DecodeEvents(body)
			if err != nil {
				t.Fatalf("200 for a batch that does not decode: %v", err)
			}
			if len(added) != len(evs) {
				t.Fatalf("200 for %d events, %d appended", len(evs), len(added))
			}
			for i, raw := range added {
				var got tether.Event
				if err := json.Unmarshal(raw, &got); err != nil || got.Type != evs[i].Type || got.RunID != rid {
					t.Fatalf("event %d appended as %s, sent %s", i, raw, evs[i].Type)
				}
			}
			if pid != "" {
				again := v.do(t, "POST", "/v1/runs/"+rid+"/events", body, hdr...)
				if again.status != 204 {
					t.Fatalf("a retry of an accepted append: %d %s", again.status, again.body)
				}
				if n := len(v.log(t, tid)); n != len(after) {
					t.Fatalf("a retry appended %d events", n-len(after))
				}
			}
		default:
			if len(added) != 0 {
				t.Fatalf("%d (%s) appended %d events", r.status, r.body, len(added))
			}
		}
		if g := v.do(t, "GET", "/v1/threads/"+tid, nil); g.status != 200 {
			t.Fatalf("the thread does not fold: %d %s", g.status, g.body)
		}
	})
}
