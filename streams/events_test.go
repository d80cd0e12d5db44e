package streams

import (
	"bytes"
	"encoding/json"
	"testing"

	tether "github.com/tetherhq/tether"
)

// TestEventLayout: data events are stored in the layout that eventData
// reads without decoding them (a change to tether.Event's encoding that
// moved the data would fall back to decoding, slower: this says so), and
// what it reads is what decoding gives.
func TestEventLayout(t *testing.T) {
	now := tether.Now()
	msgs := joinMessages([][]byte{[]byte(`{"a":"x\"y,z]"}`), []byte(`[1,2]`), []byte(`"s"`)})
	evs := append(dataEvents(now, msgs, nil, true, 1<<10), dataEvents(now, nil, []byte("\x00\xff binary \"quoted\""), false, 1<<10)...)
	evs = append(evs, dataEvents(now, nil, []byte("ab"), false, 1<<10)...)
	// Large appends, in marked pieces.
	evs = append(evs, dataEvents(now, msgs, nil, true, 8)...)
	evs = append(evs, dataEvents(now, nil, []byte("\x00\xff binary"), false, 4)...)
	marked := 0
	for i, ev := range evs {
		enc, err := ev.Encode()
		if err != nil {
			t.Fatal(err)
		}
		off := tether.FormatOffset(7, uint64(i+1))
		r := &tether.Record{Offset: off, Type: ev.Type, Data: tether.WithOffset(enc, off)}
		d, continues, ok := layoutData(r.Data)
		if !ok {
			t.Fatalf("event %d is not in the layout: %s", i, r.Data)
		}
		var rec record
		if err := json.Unmarshal(r.Data, &rec); err != nil || !bytes.Equal(d, rec.Data) || continues != (rec.Status == statusContinues) {
			t.Fatalf("event %d: %s (continues %v), decoded %s, %q (%v)", i, d, continues, rec.Data, rec.Status, err)
		}
		if continues {
			marked++
		}
	}
	if marked != 2+2 { // 3 pieces of JSON, 3 of bytes
		t.Fatalf("%d pieces marked, want 4", marked)
	}
	// Other layouts are decoded.
	for _, b := range []string{
		`{"offset":"1_2","type":"ds.data","ts":"t","data":[1],"value":[2]}`,
		`{"type":"ds.data","offset":"1_2","ts":"t","data":[1]}`,
		`{"offset":"1_2","type":"ds.data","ts":"t","run_id":"x","data":[1]}`,
		`{"offset":"1_2","type":"ds.data","ts":"t","data":"a\"b"}`,
		`{"offset":"1_2","type":"ds.data","ts":"t","status":"continuesX","data":[1]}`,
		`{"offset":"1_2","type":"ds.data","ts":"t","status":"continues","data":[1],"value":[2]}`,
	} {
		if d, _, ok := layoutData([]byte(b)); ok {
			t.Errorf("%s: read as %s", b, d)
		}
	}
	// Base64 lengths, without decoding.
	for _, s := range []string{"", "a", "ab", "abc", "abcd"} {
		b, _ := json.Marshal([]byte(s))
		r := &tether.Record{Offset: "x"}
		if n, err := decodedLen(r, b); n != len(s) || err != nil {
			t.Errorf("decodedLen(%s) = %d, %v", b, n, err)
		}
		if got, err := decodeBytes(r, b); string(got) != s || err != nil {
			t.Errorf("decodeBytes(%s) = %q, %v", b, got, err)
		}
	}
}
