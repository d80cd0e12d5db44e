package tether_test

import (
	"bytes"
	"encoding/json"
	"testing"

	tether "github.com/tetherhq/tether"
)

// FuzzDecodeEvents decodes arbitrary bodies as a worker's batch of events.
// A refusal is bad_request; an accepted batch holds no nil event and
// survives a round trip: encoding each event, offset added as the store
// adds it, and decoding the batch again gives the same events.
func FuzzDecodeEvents(f *testing.F) {
	for _, s := range []string{
		`[]`, `null`, `[null]`, `{}`, `[{"type":"custom","name":"x"}]`,
		`[{"type":"message.started","message_id":"m1","role":"assistant"},{"type":"text.delta","message_id":"m1","delta":"hi"}]`,
		`[{"type":"tool.finished","message_id":"m1","call_id":"c1","input":{"q":1},"output":null,"error":null}]`,
		`[{"type":"run.finished","status":"done"}] []`, `[{"type":"custom","bogus":1}]`, `[{"type":1}]`,
		`[{"type":"message.updated","message_id":"m1","metadata":{"a":{"b":[1,2,"\u0000"]}}}]`,
		`[{"type":"run.waiting","request":{"id":"q1","kind":"confirm","payload":{"x":true}}}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, err := tether.DecodeEvents(data)
		if err != nil {
			if code := tether.CodeOf(err); code != tether.CodeBadRequest {
				t.Fatalf("DecodeEvents(%q): code %s: %v", data, code, err)
			}
			return
		}
		var again bytes.Buffer
		again.WriteByte('[')
		for i, e := range evs {
			if e == nil {
				t.Fatalf("event %d is nil", i)
			}
			body, err := e.Encode()
			if err != nil {
				// Only values the decoder kept raw can fail to encode,
				// and the decoder only keeps valid JSON.
				t.Fatalf("event %d does not encode: %v", i, err)
			}
			stored := tether.WithOffset(body, tether.FormatOffset(1, uint64(i+1)))
			if !json.Valid(stored) {
				t.Fatalf("event %d with its offset is not JSON: %s", i, stored)
			}
			if i > 0 {
				again.WriteByte(',')
			}
			again.Write(body)
		}
		again.WriteByte(']')
		evs2, err := tether.DecodeEvents(again.Bytes())
		if err != nil {
			t.Fatalf("re-encoded batch %s is refused: %v", again.Bytes(), err)
		}
		for i := range evs {
			a, _ := evs[i].Encode()
			b, _ := evs2[i].Encode()
			if !bytes.Equal(a, b) {
				t.Fatalf("event %d changed in a round trip:\n%s\n%s", i, a, b)
			}
		}
	})
}
