package runs

import (
	"bytes"
	"encoding/json"
	"errors"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	tether "github.com/tetherhq/tether"
)

// vectorStates folds the event sequences of testdata into States.
func vectorStates(tb testing.TB) map[string]*State {
	tb.Helper()
	files, _ := filepath.Glob("testdata/reduce/*.json")
	more, _ := filepath.Glob("testdata/machine/*.json")
	out := make(map[string]*State)
	for _, name := range append(files, more...) {
		data, err := os.ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		var v struct {
			Thread json.RawMessage
			Events []*tether.Event
		}
		if err := json.Unmarshal(data, &v); err != nil {
			tb.Fatal(err)
		}
		th := newThread()
		if v.Thread != nil {
			if err := json.Unmarshal(v.Thread, &th); err != nil {
				tb.Fatal(err)
			}
		}
		s := NewState(th)
		for i, e := range v.Events {
			e.Offset = offset(i + 1)
			_ = s.Apply(e) // machine vectors include rejected events
		}
		out[filepath.Base(name)] = s
	}
	return out
}

// sameState fails unless two States hold the same thing: the machine,
// the content, the ends, the snapshot.
func sameState(t testing.TB, what string, got, want *State) {
	t.Helper()
	if a, b := dump(got.m), dump(want.m); a != b {
		t.Fatalf("%s: machines differ:\n%s\nwant\n%s", what, a, b)
	}
	if a, b := snapshotJSON(t, got), snapshotJSON(t, want); a != b {
		t.Fatalf("%s: snapshots differ:\n%s\nwant\n%s", what, a, b)
	}
	if got.offset != want.offset || !got.updated.Equal(want.updated.Time) || !reflect.DeepEqual(got.ends, want.ends) ||
		!reflect.DeepEqual(got.index, want.index) || !maps.EqualFunc(got.byRun, want.byRun, func(a, b []int) bool { return reflect.DeepEqual(a, b) }) {
		t.Fatalf("%s: offset %s/%s, ends %v/%v, index %v/%v, by run %v/%v", what, got.offset, want.offset,
			got.ends, want.ends, got.index, want.index, got.byRun, want.byRun)
	}
	checkAgrees(t, got)
}

// roundTrip encodes s, decodes it and checks that nothing was lost and
// that the encoding is canonical (the decoded State encodes the same).
func roundTrip(t testing.TB, what string, s *State) *State {
	t.Helper()
	enc, err := s.MarshalBinary()
	if err != nil {
		t.Fatalf("%s: encode: %v", what, err)
	}
	d, err := DecodeState(enc)
	if err != nil {
		t.Fatalf("%s: decode: %v", what, err)
	}
	sameState(t, what, d, s)
	again, err := d.MarshalBinary()
	if err != nil || !bytes.Equal(again, enc) {
		t.Fatalf("%s: the decoded state encodes differently (%v)", what, err)
	}
	return d
}

func TestStateRoundTrip(t *testing.T) {
	for name, s := range vectorStates(t) {
		roundTrip(t, name, s)
	}
	roundTrip(t, "empty", NewState(newThread()))
	roundTrip(t, "no metadata", NewState(tether.Thread{ID: "x"}))
}

// A decoded State goes on exactly as the one it was encoded from: every
// later event is accepted or refused alike, and they end the same. This is
// what a checkpoint promises: state at an offset, then the log after it.
func TestStateRoundTripThenFold(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	n := 800
	if testing.Short() {
		n = 200
	}
	for k := range n {
		evs := randomEvents(rng, 10+rng.IntN(80))
		s := NewState(newThread())
		cut := rng.IntN(len(evs))
		var d *State
		for i, e := range evs {
			e.Offset = offset(i + 1)
			if i == cut {
				d = roundTrip(t, "cut", s)
			}
			err := s.Apply(e)
			if d != nil {
				if derr := d.Apply(e); (err == nil) != (derr == nil) {
					t.Fatalf("sequence %d, event %d (%s): original says %v, decoded says %v", k, i, e.Type, err, derr)
				}
			}
		}
		sameState(t, "after the rest", d, s)
		roundTrip(t, "at the end", s)
	}
}

// Clones share text with the State; the encoding of either is unchanged
// by appends to the other, and a State decoded from a buffer keeps
// working when it appends to text it shares with the buffer.
func TestDecodedStateSharesNothingWritable(t *testing.T) {
	s := NewState(newThread())
	for i, e := range []*tether.Event{runCreated("r1"), runStarted("r1"), msgStarted("r1", "m1"), textDelta("r1", "m1", "abc")} {
		e.TS, e.Offset = at(i+1), offset(i+1)
		if err := s.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	enc, _ := s.MarshalBinary()
	keep := bytes.Clone(enc)
	d, err := DecodeState(enc)
	if err != nil {
		t.Fatal(err)
	}
	e := textDelta("r1", "m1", "XYZ")
	e.TS, e.Offset = at(9), offset(9)
	if err := d.Apply(e); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc, keep) {
		t.Fatal("folding into a decoded State wrote into the buffer it was decoded from")
	}
	if got := d.Snapshot().Messages[0].Parts[0].Text; got != "abcXYZ" {
		t.Fatalf("text %q", got)
	}
}

// A checkpoint of version 1, written before threads had state, is read
// as a state that is null: version 2 without it. One of version 2,
// written before runs kept their answers, is read with none.
func TestDecodeStateVersions1And2(t *testing.T) {
	for name, s := range vectorStates(t) {
		v2, err := s.appendVersion(nil, 2)
		if err != nil {
			t.Fatal(err)
		}
		// What version 2 cannot hold.
		want := s.Clone()
		for _, r := range want.m.runs {
			r.answers = nil
		}
		encWant, err := want.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		d, err := DecodeState(v2)
		if err != nil {
			t.Fatalf("%s: version 2: %v", name, err)
		}
		sameState(t, name+" (version 2)", d, want)
		if again, _ := d.MarshalBinary(); !bytes.Equal(again, encWant) {
			t.Fatalf("%s: a version 2 state encodes differently as version %d", name, stateVersion)
		}
		if s.m.state != nil {
			continue
		}
		// Version 2 writes the null state as one 0 byte right after the
		// status of the last run to finish; version 1 has nothing there.
		pre := []byte{2}
		pre = appendString(pre, s.thread.ID)
		pre = appendBytes(pre, s.thread.Metadata)
		pre = appendTime(pre, s.thread.CreatedAt)
		pre = appendTime(pre, s.updated)
		pre = appendString(pre, string(s.offset))
		pre = appendString(pre, string(s.m.th.last))
		if !bytes.HasPrefix(v2, pre) || v2[len(pre)] != 0 {
			t.Fatalf("%s: the encoding does not start as expected", name)
		}
		v1 := append([]byte{1}, v2[1:len(pre)]...)
		v1 = append(v1, v2[len(pre)+1:]...)
		d, err = DecodeState(v1)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sameState(t, name, d, want)
		if again, _ := d.MarshalBinary(); !bytes.Equal(again, encWant) {
			t.Fatalf("%s: a version 1 state encodes differently as version %d", name, stateVersion)
		}
	}
}

func TestDecodeStateRejects(t *testing.T) {
	s := vectorStates(t)["03_tool_calls.json"]
	enc, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []byte{0, stateVersion + 1, 255} {
		bad := append([]byte{v}, enc[1:]...)
		if _, err := DecodeState(bad); !errors.Is(err, ErrStateVersion) {
			t.Errorf("version %d: %v, want ErrStateVersion", v, err)
		}
	}
	if _, err := DecodeState(nil); !errors.Is(err, ErrStateCorrupt) {
		t.Errorf("empty: %v", err)
	}
	for n := 1; n < len(enc); n++ {
		if _, err := DecodeState(enc[:n]); !errors.Is(err, ErrStateCorrupt) {
			t.Fatalf("cut at %d of %d: %v, want ErrStateCorrupt", n, len(enc), err)
		}
	}
	if _, err := DecodeState(append(bytes.Clone(enc), 0)); !errors.Is(err, ErrStateCorrupt) {
		t.Errorf("a byte after the state: %v", err)
	}

	// States that break the invariants folding keeps: encoded as they are,
	// refused on decode.
	broken := map[string]func(s *State){
		"two active runs": func(s *State) {
			for _, r := range s.m.runs {
				r.run.Status = tether.RunRunning
			}
		},
		"waiting without a request": func(s *State) {
			for _, r := range s.m.runs {
				r.run.Status, r.run.Request = tether.RunWaiting, nil
				break
			}
		},
		"unknown run status": func(s *State) {
			for _, r := range s.m.runs {
				r.run.Status = "sleeping"
			}
		},
		"message of no run": func(s *State) {
			for _, ms := range s.m.msgs {
				ms.runID = "nope"
			}
		},
		"running message in a finished run": func(s *State) {
			for _, ms := range s.m.msgs {
				ms.status = tether.MessageRunning
			}
			for _, r := range s.m.runs {
				r.run.Status = tether.RunDone
			}
		},
		"tool part without its call": func(s *State) {
			for _, c := range s.msgs {
				for i := range c.parts {
					if c.parts[i].typ == tether.PartTool {
						c.parts[i].x = nil
					}
				}
			}
		},
		"unknown part type": func(s *State) { s.msgs[0].parts = append(s.msgs[0].parts, part{typ: "video"}) },
		"repeated message": func(s *State) {
			s.msgs = append(s.msgs, s.msgs[0])
			s.m.msgs["extra"] = s.m.msgs[s.msgs[0].id]
		},
		"invalid JSON":           func(s *State) { s.msgs[0].meta = json.RawMessage(`{"a":`) },
		"metadata not an object": func(s *State) { s.msgs[0].meta = json.RawMessage(`[1]`) },
		"bad offset":             func(s *State) { s.offset = "yesterday" },
	}
	for name, breakIt := range broken {
		b := vectorStates(t)["03_tool_calls.json"]
		if name == "two active runs" {
			b = vectorStates(t)["10_enqueued_runs.json"]
		}
		breakIt(b)
		enc, err := b.MarshalBinary()
		if err != nil {
			continue // refused on encode already
		}
		if _, err := DecodeState(enc); !errors.Is(err, ErrStateCorrupt) {
			t.Errorf("%s: %v, want ErrStateCorrupt", name, err)
		}
	}
}

// The encoding writes every field of what it encodes by hand: a field
// added to one of these types must be added to the encoding (and the
// version bumped), or checkpoints would lose it. Counted apart, what is
// derived and rebuilt after a decode: msgState's ownTools, calls and
// indexed, content's calls, indexed and metaTree (written out to meta
// before an encoding), Machine's work (written out to state likewise).
func TestStateEncodingFields(t *testing.T) {
	for _, c := range []struct {
		v      any
		fields int
	}{
		{tether.Run{}, 15}, {tether.InputMessage{}, 4}, {tether.Request{}, 3}, {tether.ErrorInfo{}, 2},
		{State{}, 9}, {Machine{}, 7 + 1}, {runState{}, 3}, {msgState{}, 7 + 3}, {toolState{}, 2}, {threadState{}, 4},
		{content{}, 3 + 3}, {part{}, 3}, {extra{}, 7},
	} {
		typ := reflect.TypeOf(c.v)
		if typ.NumField() != c.fields {
			t.Errorf("%s has %d fields, the state encoding knows %d: encode the new ones and bump stateVersion", typ, typ.NumField(), c.fields)
		}
	}
}

// FuzzDecodeState decodes arbitrary bytes. Whatever they are, decoding
// never panics; what it accepts is a State that keeps its invariants,
// encodes canonically, clones, and folds further events without panicking.
func FuzzDecodeState(f *testing.F) {
	for _, s := range vectorStates(f) {
		enc, err := s.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeState(data)
		if err != nil {
			if !errors.Is(err, ErrStateCorrupt) && !errors.Is(err, ErrStateVersion) {
				t.Fatalf("error %v is neither ErrStateCorrupt nor ErrStateVersion", err)
			}
			return
		}
		checkAgrees(t, s)
		d := roundTrip(t, "decoded", s)
		c := s.Clone()
		epoch, seq, err := tether.ParseOffset(s.Offset())
		if s.Offset() == tether.OffsetStart {
			epoch, seq, err = 1, 0, nil
		}
		if err != nil || seq > 1<<50 || epoch > 1<<30 {
			return
		}
		h := fnv.New64a()
		h.Write(data)
		rng := rand.New(rand.NewPCG(h.Sum64(), 1))
		for i, e := range randomEvents(rng, 30) {
			e.Offset = tether.FormatOffset(epoch, seq+uint64(i)+1)
			err1, err2 := c.Apply(e), d.Apply(e)
			if (err1 == nil) != (err2 == nil) {
				t.Fatalf("event %d: clone says %v, decoded says %v", i, err1, err2)
			}
		}
		checkAgrees(t, c)
	})
}
