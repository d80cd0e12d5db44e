package tether

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// decodeJSON is the reference: what encoding/json makes of a batch, as
// DecodeEvents decodes what the fast path leaves.
func decodeJSON(data []byte) ([]*Event, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var evs []*Event
	if err := dec.Decode(&evs); err != nil || dec.More() {
		return nil, false
	}
	return evs, true
}

// checkFast fails t if the fast path accepts data and decodes it otherwise
// than encoding/json, or accepts what encoding/json refuses; it reports
// whether the fast path took it.
func checkFast(t *testing.T, data []byte) bool {
	t.Helper()
	got, ok := decodeEventsFast(data)
	if !ok {
		return false
	}
	want, wok := decodeJSON(data)
	if !wok {
		t.Fatalf("fast path accepts %q, which encoding/json refuses", data)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decode %q:\n fast %+v\n json %+v", data, deref(got), deref(want))
	}
	return true
}

func deref(evs []*Event) []Event {
	out := make([]Event, len(evs))
	for i, e := range evs {
		out[i] = *e
	}
	return out
}

func TestDecodeFastMatchesJSON(t *testing.T) {
	fast := []string{
		`[]`, ` [ ] `, `[{}]`,
		`[{"type":"text.delta","message_id":"m1","delta":"Hi"}]`,
		"[\n {\"type\" : \"message.started\" ,\t\"message_id\":\"m1\",\"role\":\"assistant\"},\r\n{\"type\":\"text.delta\",\"delta\":\"é€😀 <b>&\"} ]\n",
		`[{"type":"a","type":"b","run_id":"r","call_id":"c","name":"n","status":"s","worker_id":"w","request_id":"q"}]`,
	}
	for _, s := range fast {
		if !checkFast(t, []byte(s)) {
			t.Errorf("fast path refuses %q", s)
		}
	}
	// Left to encoding/json: escapes, invalid UTF-8, other names (or the
	// right ones in another case), other values, bad JSON.
	slow := []string{
		`null`, `{}`, `[null]`, `[{"delta":"a\nb"}]`, "[{\"delta\":\"\xff\"}]", `[{"Type":"x"}]`,
		`[{"ts":"2026-12-01T00:00:00Z"}]`, `[{"attempt":1}]`, `[{"input":{"q":1}}]`, `[{"delta":null}]`,
		`[{"delta":1}]`, `[{"bogus":"x"}]`, `[{"type":"x"}] []`, `[{"type":"x"},]`, `[{"type":"x",}]`,
		`[{"type":"x"}`, `[{"type" "x"}]`, "[{\"delta\":\"a\tb\"}]", `[{"type":"x"}}]`,
	}
	for _, s := range slow {
		if checkFast(t, []byte(s)) {
			t.Errorf("fast path takes %q", s)
		}
	}
}

// FuzzDecodeFastMatchesJSON checks the fast path against encoding/json on
// arbitrary bodies.
func FuzzDecodeFastMatchesJSON(f *testing.F) {
	for _, s := range []string{
		`[{"type":"text.delta","message_id":"m1","delta":"Hi"}]`, `[]`, `[{},{"role":"user"}]`,
		`[{"type":"x","type":"y"}]`, "[{\"delta\":\"\xe2\x80\xa8\"}]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkFast(t, data) })
}

// BenchmarkDecodeEvents decodes one 200-byte text.delta, as a worker sends
// it: DecodeEvents against the encoding/json reference it matches.
func BenchmarkDecodeEvents(b *testing.B) {
	body := []byte(`[{"type":"text.delta","message_id":"msg_0123456789abcdef","delta":"` +
		string(bytes.Repeat([]byte("lorem ipsum "), 17))[:200] + `"}]`)
	b.Run("DecodeEvents", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeEvents(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := decodeJSON(body); !ok {
				b.Fatal("refused")
			}
		}
	})
}
