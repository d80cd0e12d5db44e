package natsstore

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
)

func TestToken(t *testing.T) {
	ids := []string{"a", "b", "ab", "run_01jd8m1c6q4m0z5r6x7y8z9a0b", "ds:x/y", "a.b", "~", "é", "ds;x", "*", ">"}
	seen := map[string]string{}
	for _, id := range ids {
		tok := token(id)
		if tok == "" || strings.ContainsAny(tok, ".*> \t") {
			t.Fatalf("token(%q) = %q is not one subject token", id, tok)
		}
		if other, ok := seen[tok]; ok {
			t.Fatalf("%q and %q share the token %q", id, other, tok)
		}
		seen[tok] = id
		back, err := tokenEncoding.DecodeString(tok)
		if err != nil || string(back) != id {
			t.Fatalf("token(%q) = %q decodes to %q, %v", id, tok, back, err)
		}
	}
	if token("") != "_" {
		t.Fatal("the empty ID has no token")
	}
}

func TestOffsets(t *testing.T) {
	for _, c := range []struct {
		epoch, seq uint64
		n          int
	}{{1, 1, 3}, {1_700_000_000, 12345, 1}, {maxEpoch, maxMsgSeq, eventsPerMsg}} {
		offs := offsets(c.epoch, c.seq, c.n)
		for i, o := range offs {
			want := tether.FormatOffset(c.epoch, c.seq*eventsPerMsg+uint64(i))
			if o != want || offsetOf(c.epoch, c.seq, i) != want {
				t.Fatalf("offset of event %d of message %d: %q, want %q", i, c.seq, o, want)
			}
			if i > 0 && !o.After(offs[i-1]) {
				t.Fatalf("%q does not follow %q", o, offs[i-1])
			}
		}
	}
	// The next message's first event follows the last one of a full message.
	if !offsetOf(1, 2, 0).After(offsetOf(1, 1, eventsPerMsg-1)) {
		t.Fatal("offsets of consecutive messages overlap")
	}
}

func sampleBody(tb testing.TB) []byte {
	tb.Helper()
	h := &header{ID: "t", Create: true, Prev: 3, Version: 2, Before: tether.OffsetStart,
		Thread:    &wireThread{ID: "t", Status: "idle", Metadata: []byte(`{"k":"v"}`)},
		Runs:      []*wireRun{{Run: []byte(`{"id":"r1","status":"pending"}`), Key: "k", id: "r1"}},
		Producers: []wireProducer{{Key: "p", Epoch: 1, Seq: 2}}}
	b, err := encodeBody(h, []wireEvent{
		{Type: "custom", RunID: "r1", MessageID: "m", Data: []byte(`{"type":"custom","data":1}`)},
		{Type: "text.delta", Data: []byte(`{"type":"text.delta","delta":"é\n"}`)},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestBodyRoundTrip(t *testing.T) {
	h, rest, err := decodeHeader(sampleBody(t))
	if err != nil {
		t.Fatal(err)
	}
	if h.ID != "t" || !h.Create || h.Prev != 3 || len(h.Runs) != 1 || h.Runs[0].id != "r1" || h.Runs[0].terminal {
		t.Fatalf("header %+v", h)
	}
	evs, err := decodeEvents(rest)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := countEvents(rest); n != 2 || len(evs) != 2 {
		t.Fatalf("%d events", len(evs))
	}
	if evs[1].Type != "text.delta" || !bytes.Equal(evs[1].Data, []byte(`{"type":"text.delta","delta":"é\n"}`)) || evs[0].RunID != "r1" {
		t.Fatalf("events %+v", evs)
	}
}

// FuzzDecodeBody feeds the decoder of log messages anything: it must fail
// cleanly, and what it accepts must encode back to the same header.
func FuzzDecodeBody(f *testing.F) {
	f.Add(sampleBody(f))
	f.Add([]byte{formatVersion, 2, '{', '}', 0})
	f.Add([]byte{formatVersion, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, body []byte) {
		h, rest, err := decodeHeader(body)
		if err != nil {
			return
		}
		evs, err := decodeEvents(rest)
		if err != nil {
			return
		}
		if n, err := countEvents(rest); err != nil || n != len(evs) {
			t.Fatalf("counted %d events (%v), decoded %d", n, err, len(evs))
		}
		again, err := encodeBody(h, evs)
		if err != nil {
			t.Fatal(err)
		}
		h2, rest2, err := decodeHeader(again)
		if err != nil {
			t.Fatal(err)
		}
		evs2, err := decodeEvents(rest2)
		if err != nil || h2.ID != h.ID || h2.Prev != h.Prev || len(evs2) != len(evs) {
			t.Fatalf("round trip changed the message: %v", err)
		}
		for i := range evs {
			if evs[i].Type != evs2[i].Type || !slices.Equal(evs[i].Data, evs2[i].Data) {
				t.Fatalf("event %d changed", i)
			}
		}
	})
}

// A run row written before leases named their key reads with an empty
// KeyID; a new row keeps it.
func TestWireRunKeyID(t *testing.T) {
	old := []byte(`{"run":{"id":"r1","thread_id":"t1","status":"running"},"token":"tok","owner":"w1","expires":1700000000000000000}`)
	var w wireRun
	if err := json.Unmarshal(old, &w); err != nil {
		t.Fatal(err)
	}
	rr, err := w.record()
	if err != nil || rr.Lease.Token != "tok" || rr.Lease.Owner != "w1" || rr.Lease.KeyID != "" {
		t.Fatalf("old row: %+v, %v", rr, err)
	}
	rr.Lease.KeyID = "k1"
	nw, err := toWireRun(rr)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(nw)
	var back wireRun
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if rr2, err := back.record(); err != nil || rr2.Lease.KeyID != "k1" {
		t.Fatalf("new row %s: %+v, %v", b, rr2, err)
	}
}
