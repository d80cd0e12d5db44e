package runs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
)

// patchCase is a vector of testdata/jsonpatch/cases.json, which the
// TypeScript reducer runs too.
type patchCase struct {
	Name   string          `json:"name"`
	Doc    json.RawMessage `json:"doc"`
	Patch  json.RawMessage `json:"patch"`
	Result json.RawMessage `json:"result"`
	Error  tether.Code     `json:"error"`
}

func patchCases(t testing.TB) []patchCase {
	t.Helper()
	data, err := os.ReadFile("testdata/jsonpatch/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		About string      `json:"about"`
		Cases []patchCase `json:"cases"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v.Cases
}

// TestJSONPatchVectors applies each vector's patch with a state.delta on a
// thread whose state is the vector's doc: accepted with the result, or
// refused with the code, and then changing nothing.
func TestJSONPatchVectors(t *testing.T) {
	cases := patchCases(t)
	if len(cases) < 40 {
		t.Fatalf("%d cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			evs := []*tether.Event{runCreated("r1"), runStarted("r1")}
			if c.Doc != nil {
				evs = append(evs, &tether.Event{Type: tether.EventStateSnapshot, RunID: "r1", State: c.Doc})
			}
			s := mustFold(t, evs...)
			before := snapshotJSON(t, s)
			d := stamp(len(evs), &tether.Event{Type: tether.EventStateDelta, RunID: "r1", Patch: c.Patch})[0]
			err := s.Apply(d)
			if c.Error != "" {
				if tether.CodeOf(err) != c.Error {
					t.Fatalf("got %v, want %s", err, c.Error)
				}
				if after := snapshotJSON(t, s); after != before {
					t.Fatalf("a refused patch changed the snapshot:\n%s\n%s", before, after)
				}
				t.Log(err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := c.Result
			if isNull(want) {
				want = nil
			}
			got := s.Snapshot().State
			if (got == nil) != (want == nil) || (got != nil && diffJSON(t, got, want) != "") {
				t.Fatalf("state %s, want %s", got, want)
			}
		})
	}
}

// What a client reads of a refused patch names no Go type or internal.
func TestJSONPatchErrorsLeakNothing(t *testing.T) {
	for _, c := range patchCases(t) {
		if c.Error == "" {
			continue
		}
		ops, err := parsePatch(c.Patch)
		if err == nil {
			doc := c.Doc
			if isNull(doc) {
				doc = nil
			}
			_, err = applyPatch(doc, ops)
		}
		if err == nil {
			t.Fatalf("%s: no error", c.Name)
		}
		for _, bad := range []string{"runs.", "*", "Go value", "interface", "[]"} {
			if bytes.Contains([]byte(err.Error()), []byte(bad)) {
				t.Errorf("%s: %q names %q", c.Name, err, bad)
			}
		}
	}
}

// FuzzJSONPatch applies arbitrary patches to arbitrary documents: never a
// panic; what is accepted is valid JSON in its canonical form (it
// encodes the same once decoded); the document is not modified.
func FuzzJSONPatch(f *testing.F) {
	for _, c := range patchCases(f) {
		f.Add([]byte(c.Doc), []byte(c.Patch))
	}
	f.Fuzz(func(t *testing.T, doc, patch []byte) {
		if !json.Valid(doc) {
			return
		}
		ops, err := parsePatch(patch)
		if err != nil {
			return
		}
		if isNull(doc) {
			doc = nil
		}
		keep := bytes.Clone(doc)
		out, err := applyPatch(doc, ops)
		if !bytes.Equal(doc, keep) {
			t.Fatal("the document was modified")
		}
		if err != nil || out == nil || len(ops) == 0 {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("result %q is not JSON", out)
		}
		// The sizes the patcher keeps are those of what it writes.
		var p patcher
		if keep != nil {
			var c bytes.Buffer
			_ = json.Compact(&c, keep)
			p.root = json.RawMessage(c.Bytes())
		}
		for i := range ops {
			if err := p.apply(&ops[i]); err != nil {
				t.Fatalf("operation %d applied once but not again: %v", i, err)
			}
			checkSizes(t, p.root)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, out); err != nil || !bytes.Equal(buf.Bytes(), out) {
			t.Fatalf("result %s is not compact JSON (%v)", out, err)
		}
	})
}

// checkSizes fails t unless every container of the tree v has the size of
// what encodeTree writes of it.
func checkSizes(t *testing.T, v any) {
	t.Helper()
	var buf bytes.Buffer
	_ = encodeTree(&buf, v)
	if sizeOf(v) != buf.Len() {
		t.Fatalf("size %d of %.80s, which is %d bytes", sizeOf(v), buf.Bytes(), buf.Len())
	}
	switch x := v.(type) {
	case *node:
		for _, k := range x.keys {
			checkSizes(t, x.vals[k])
		}
	case *array:
		for _, e := range x.elems {
			checkSizes(t, e)
		}
	}
}

// The patcher keeps the size of every container it changes, member names
// written escaped included, so that a state is measured at the cost of a
// patch.
func TestJSONPatchSizes(t *testing.T) {
	doc := json.RawMessage(`{"<a>":{"b&":[1,{"\u00e9":2}],"c":"\u2028"},"d":[],"e":{}}`)
	for _, patch := range []string{
		`[{"op":"add","path":"/<a>/b&/1/x\u0001","value":{"<":">"}}]`,
		`[{"op":"remove","path":"/<a>/b&/0"},{"op":"remove","path":"/<a>/b&/0"}]`,
		`[{"op":"move","from":"/<a>/b&","path":"/d/-"},{"op":"copy","from":"/d","path":"/e/ "}]`,
		`[{"op":"replace","path":"/<a>","value":[]},{"op":"add","path":"/<a>/0","value":"x"},{"op":"add","path":"/<a>/0","value":"y"}]`,
		`[{"op":"remove","path":"/e"},{"op":"remove","path":"/d"},{"op":"remove","path":"/<a>"}]`,
		`[{"op":"replace","path":"","value":[1]},{"op":"add","path":"/-","value":{}},{"op":"add","path":"/1/k","value":1}]`,
	} {
		ops, err := parsePatch(json.RawMessage(patch))
		if err != nil {
			t.Fatal(err)
		}
		p := patcher{root: doc}
		for i := range ops {
			if err := p.apply(&ops[i]); err != nil {
				t.Fatalf("%s: operation %d: %v", patch, i, err)
			}
			checkSizes(t, p.root)
		}
	}
}

// A Tx sees the state its events set; its machine does not until Commit,
// and a refused delta leaves the Tx's state as it was.
func TestStateInTx(t *testing.T) {
	s := mustFold(t, runCreated("r1"), runStarted("r1"),
		&tether.Event{Type: tether.EventStateSnapshot, RunID: "r1", State: json.RawMessage(`{"n":1}`)})
	m := s.Machine().Clone()
	tx := m.Begin()
	for _, e := range stamp(3,
		&tether.Event{Type: tether.EventStateDelta, RunID: "r1", Patch: json.RawMessage(`[{"op":"replace","path":"/n","value":2}]`)},
	) {
		if err := tx.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	bad := stamp(4, &tether.Event{Type: tether.EventStateDelta, RunID: "r1", Patch: json.RawMessage(`[{"op":"remove","path":"/x"}]`)})[0]
	if err := tx.Apply(bad); tether.CodeOf(err) != tether.CodeConflict {
		t.Fatalf("a delta that does not apply: %v", err)
	}
	if got := string(tx.State()); got != `{"n":2}` {
		t.Fatalf("Tx state %s", got)
	}
	if got := string(m.State()); got != `{"n":1}` {
		t.Fatalf("machine state before Commit %s", got)
	}
	tx.Commit()
	if got := string(m.State()); got != `{"n":2}` {
		t.Fatalf("machine state after Commit %s", got)
	}
	if got := string(s.Snapshot().State); got != `{"n":1}` {
		t.Fatalf("the State cloned from changed: %s", got)
	}
}

// The bound on copies is the whole patch's, not each operation's: a
// patch of small copies cannot grow the state without bound.
func TestJSONPatchCopyBoundAcrossTests(t *testing.T) {
	doc := json.RawMessage(`{"a":"` + strings.Repeat("x", 100<<10) + `","t":1}`)
	var ops []string
	for i := range 40 {
		ops = append(ops, fmt.Sprintf(`{"op":"copy","from":"/a","path":"/c%d"}`, i), `{"op":"test","path":"/t","value":1}`)
	}
	p, err := parsePatch(json.RawMessage("[" + strings.Join(ops, ",") + "]"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := applyPatch(doc, p)
	if err == nil {
		t.Fatalf("a patch that grew the state to %d bytes was applied", len(out))
	}
	if !strings.Contains(err.Error(), "1 MiB") {
		t.Fatalf("error %v", err)
	}
}

// The bounds on the state hold new writes only: a log stored before them,
// with a state over them, still folds, and a write may shrink that state
// but not grow it.
func TestStateBoundsNewWritesOnly(t *testing.T) {
	deep := strings.Repeat(`{"x":`, 200) + "1" + strings.Repeat("}", 200)
	ptr := strings.Repeat("/x", 200)
	delta := func(patch string) *tether.Event {
		return &tether.Event{Type: tether.EventStateDelta, RunID: "r1", Patch: json.RawMessage(patch)}
	}
	s := mustFold(t, runCreated("r1"), runStarted("r1"),
		&tether.Event{Type: tether.EventStateSnapshot, RunID: "r1", State: json.RawMessage(`{"big":"` + strings.Repeat("b", maxStateBytes) + `","d":` + deep + `}`)},
		delta(`[{"op":"replace","path":"/d`+ptr[:len(ptr)-2]+`","value":`+deep+`}]`),
	)
	n := 4
	for _, c := range []struct {
		patch string
		code  tether.Code
	}{
		{`[{"op":"add","path":"/n","value":1}]`, tether.CodeTooLarge},
		{`[{"op":"add","path":"/d` + ptr + `/y","value":1}]`, tether.CodeTooLarge},
		{`[{"op":"replace","path":"/big","value":"small"}]`, ""},
		{`[{"op":"add","path":"/n","value":1}]`, ""},
		{`[{"op":"remove","path":"/d` + ptr[:60] + `"}]`, ""},
		{`[{"op":"replace","path":"/big","value":"` + strings.Repeat("b", maxStateBytes) + `"}]`, tether.CodeTooLarge},
	} {
		tx := s.Machine().Clone().Begin()
		err := tx.Apply(stamp(n, delta(c.patch))[0])
		if (err == nil) != (c.code == "") || err != nil && tether.CodeOf(err) != c.code {
			t.Fatalf("%.80s: %v, want %q", c.patch, err, c.code)
		}
		if err == nil {
			if err := s.Apply(stamp(n, delta(c.patch))[0]); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
}
