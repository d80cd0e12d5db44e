package runs

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestMergePatch(t *testing.T) {
	cases := []struct{ target, patch, want string }{
		// RFC 7396, appendix A.
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
		// Beyond the RFC's table.
		{``, `{"a":1}`, `{"a":1}`},
		{`{"a":1}`, `{}`, `{"a":1}`},
		{` { "a" : { "x" : 1 } } `, ` { "a" : { "y" : 2 } } `, `{"a":{"x":1,"y":2}}`},
		{`{"a":1,"a":2}`, `{"b":3}`, `{"a":2,"b":3}`},
		{`{"a\"<b>":1}`, `{"c":"\u00e9"}`, `{"a\"<b>":1,"c":"é"}`},
		{`{"a":1}`, `{"a":`, `{"a":1}`}, // an invalid patch changes nothing
	}
	for _, c := range cases {
		got := MergePatch(json.RawMessage(c.target), json.RawMessage(c.patch))
		if !jsonEqual(t, got, []byte(c.want)) {
			t.Errorf("MergePatch(%s, %s) = %s, want %s", c.target, c.patch, got, c.want)
		}
	}
}

func TestMergePatchOrder(t *testing.T) {
	got := MergePatch(json.RawMessage(`{"z":1,"y":{"b":1,"a":2},"x":3}`), json.RawMessage(`{"y":{"c":3},"w":4,"z":null,"v":5}`))
	if want := `{"y":{"b":1,"a":2,"c":3},"x":3,"w":4,"v":5}`; string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	// Large objects take the indexed path.
	target := map[string]int{}
	patch := map[string]any{}
	want := map[string]any{}
	for i := range 100 {
		k := string(rune('a'+i%26)) + string(rune('0'+i/26))
		target[k] = i
		if i%2 == 0 {
			patch[k] = nil
		} else {
			want[k] = float64(i)
		}
	}
	patch["new"] = true
	want["new"] = true
	tb, _ := json.Marshal(target)
	pb, _ := json.Marshal(patch)
	var g any
	if err := json.Unmarshal(MergePatch(tb, pb), &g); err != nil || !reflect.DeepEqual(g, any(want)) {
		t.Fatalf("large merge: %v %v", g, err)
	}
}

func TestMergePatchKeepsInputs(t *testing.T) {
	target := json.RawMessage(`{"a":{"b":1}}`)
	patch := json.RawMessage(`{"a":{"c":2}}`)
	MergePatch(target, patch)
	if string(target) != `{"a":{"b":1}}` || string(patch) != `{"a":{"c":2}}` {
		t.Fatalf("inputs changed: %s %s", target, patch)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Errorf("%s: %v", a, err)
		return false
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}
