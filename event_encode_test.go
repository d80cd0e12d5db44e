package tether_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
)

// marshal is the reference: what encoding/json makes of e without its
// offset.
func marshal(t testing.TB, e tether.Event) []byte {
	t.Helper()
	e.Offset = ""
	b, err := json.Marshal(&e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// eventWith returns an event with s in each of its string fields, so that
// one comparison covers every key and its escaping.
func eventWith(s string, attempt int, ts tether.Time) tether.Event {
	return tether.Event{
		Offset: "ignored", Type: s, TS: ts, RunID: s, MessageID: s, Role: tether.Role(s),
		Delta: s, CallID: s, Name: s, Status: s, WorkerID: s, Attempt: attempt, RequestID: s,
	}
}

func TestEncodeMatchesJSON(t *testing.T) {
	ts := tether.At(time.Date(2026, 12, 1, 23, 15, 34, 123456789, time.FixedZone("x", 3600)))
	strs := []string{
		"", "hello", `say "hi" \ there`, "line\nbreak\r\ttab\b\f", "\x00\x01\x1f\x7f",
		"<script>&amp;</script>", "é€😀", "\u2028\u2029", "bad \xff utf8 \xe2\x82", "\xed\xa0\x80",
	}
	for _, s := range strs {
		for _, attempt := range []int{0, 1, -3} {
			for _, when := range []tether.Time{ts, {}} {
				e := eventWith(s, attempt, when)
				got, err := e.Encode()
				if err != nil {
					t.Fatal(err)
				}
				if want := marshal(t, e); !bytes.Equal(got, want) {
					t.Errorf("Encode(%q):\n got %s\nwant %s", s, got, want)
				}
			}
		}
	}
	// The events of each type as the engine appends them, sparse fields
	// included, and the ones with raw or nested values, which take the
	// other path.
	events := []tether.Event{
		{Type: tether.EventTextDelta, TS: ts, RunID: "run_1", MessageID: "m1", Delta: "Hi"},
		{Type: tether.EventMessageStarted, TS: ts, RunID: "run_1", MessageID: "m1", Role: tether.RoleAssistant},
		{Type: tether.EventRunStarted, TS: ts, RunID: "run_1", WorkerID: "w1", Attempt: 2},
		{Type: tether.EventMessageStarted, TS: ts, MessageID: "m1", Metadata: json.RawMessage(` {"a" : "<b>"} `)},
		{Type: tether.EventToolStarted, TS: ts, CallID: "c1", Name: "search", Input: json.RawMessage(`{"q": 1}`)},
		{Type: tether.EventRunWaiting, TS: ts, Request: &tether.Request{ID: "q1", Kind: "confirm"}},
	}
	for _, e := range events {
		got, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if want := marshal(t, e); !bytes.Equal(got, want) {
			t.Errorf("Encode(%s):\n got %s\nwant %s", e.Type, got, want)
		}
	}
}

// FuzzEncodeMatchesJSON checks Encode against encoding/json on arbitrary
// strings, counts and times.
func FuzzEncodeMatchesJSON(f *testing.F) {
	f.Add("text.delta", "Hi <b>\n", 0, int64(1764630934123))
	f.Add("\xff\u2028\x00", "", 7, int64(0))
	f.Fuzz(func(t *testing.T, a, b string, attempt int, ms int64) {
		var ts tether.Time
		if ms != 0 {
			ts = tether.At(time.UnixMilli(ms % 253402300799000))
		}
		e := eventWith(a, attempt, ts)
		e.Delta, e.Name = b, b+a
		got, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if want := marshal(t, e); !bytes.Equal(got, want) {
			t.Fatalf("Encode:\n got %s\nwant %s", got, want)
		}
	})
}

// BenchmarkEncode encodes a 200-byte text.delta: Encode against the
// encoding/json reference it matches.
func BenchmarkEncode(b *testing.B) {
	e := tether.Event{Type: tether.EventTextDelta, TS: tether.Now(), RunID: "run_0123456789abcdef",
		MessageID: "msg_0123456789abcdef", Delta: string(bytes.Repeat([]byte("lorem ipsum "), 17))[:200]}
	b.Run("Encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.Encode(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			marshal(b, e)
		}
	})
}

// TestEncodeEveryField sets each field of Event in turn: a field added to
// Event but not to Encode's fast path fails here.
func TestEncodeEveryField(t *testing.T) {
	typ := reflect.TypeFor[tether.Event]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		var e tether.Event
		v := reflect.ValueOf(&e).Elem().Field(i)
		switch {
		case f.Type == reflect.TypeFor[json.RawMessage]():
			v.SetBytes([]byte(`{"k":1}`))
		case f.Type == reflect.TypeFor[tether.Time]():
			v.Set(reflect.ValueOf(tether.Now()))
		case v.Kind() == reflect.String:
			v.SetString("x")
		case v.Kind() == reflect.Int:
			v.SetInt(1)
		case v.Kind() == reflect.Pointer:
			v.Set(reflect.New(f.Type.Elem()))
		default:
			t.Fatalf("field %s: a kind (%s) this test does not fill", f.Name, v.Kind())
		}
		got, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if want := marshal(t, e); !bytes.Equal(got, want) {
			t.Errorf("only %s set:\n got %s\nwant %s", f.Name, got, want)
		}
	}
}
