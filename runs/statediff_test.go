package runs_test

import (
	"encoding/json"
	"testing"

	"github.com/tetherhq/tether/runs"
)

// TestStatePatch: the patch turns from into to, and changes nothing when
// applied to to (the state a front end that sent it holds).
func TestStatePatch(t *testing.T) {
	cases := []struct{ from, to string }{
		{`{"a":1,"b":{"c":[1,2],"d":"x"}}`, `{"a":1,"b":{"c":[1,3],"d":"x"}}`},
		{`{"a":1,"b":2}`, `{"b":2,"a":1.0}`},
		{`{"a":1,"b":{"c":1,"d":2}}`, `{"a":1,"b":{"c":1}}`},
		{`{"a":[1,2],"x/y~":1}`, `{"a":[1,2,3],"x/y~":2,"n":null}`},
		{`{"a":{"b":1}}`, `{"a":[1]}`},
		{`[{"a":1},{"a":2}]`, `[{"a":1},{"a":3}]`},
		{`{"a":1}`, `"s"`},
		{`{"a":1}`, `{"a":1}`},
	}
	same := func(a, b json.RawMessage) bool {
		var x, y any
		_ = json.Unmarshal(a, &x)
		_ = json.Unmarshal(b, &y)
		xa, _ := json.Marshal(x)
		ya, _ := json.Marshal(y)
		return string(xa) == string(ya)
	}
	for _, c := range cases {
		patch := runs.StatePatch(json.RawMessage(c.from), json.RawMessage(c.to))
		for _, base := range []string{c.from, c.to} {
			got, err := runs.ApplyPatch(json.RawMessage(base), patch)
			if err != nil || !same(got, json.RawMessage(c.to)) {
				t.Errorf("%s → %s: patch %s applied to %s: %s, %v", c.from, c.to, patch, base, got, err)
			}
		}
	}
	if p := runs.StatePatch(json.RawMessage(`{"a":{"b":1}}`), json.RawMessage(`{"a":{"b":1.0},"c":2}`)); string(p) != `[{"op":"add","path":"/c","value":2}]` {
		t.Errorf("patch %s, want only what changed", p)
	}
	// Every element changed: the array whole is shorter.
	if p := runs.StatePatch(json.RawMessage(`{"x":"big","a":[1,2,3,4]}`), json.RawMessage(`{"x":"big","a":[5,6,7,8]}`)); string(p) != `[{"op":"replace","path":"/a","value":[5,6,7,8]}]` {
		t.Errorf("patch %s, want the array replaced", p)
	}
}
