package runs

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// StatePatch returns an RFC 6902 JSON Patch that turns the state from
// into to, for a writer that cannot send to whole: a state larger than
// the largest event, of which a front end changed a little (AG-UI's
// RunAgentInput.state). from must not be null (nil): there is nothing to
// patch then. Values are compared as JSON values (numbers as doubles,
// objects whatever their member order), as a browser that sends a state
// back has them.
//
// The patch also applies, and changes nothing, to to itself: the state
// the front end holds already, which its stream patches too. So a member
// to leaves out is added (null) before it is removed, and an array whose
// length changed is replaced whole (its elements cannot be added to to
// again).
func StatePatch(from, to json.RawMessage) json.RawMessage {
	var d stateDiff
	d.diff("", from, to)
	if d.ops == nil {
		return json.RawMessage("[]")
	}
	b, _ := json.Marshal(d.ops)
	return b
}

type diffOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value,omitempty"`
}

type stateDiff struct {
	ops []diffOp
}

func (d *stateDiff) diff(path string, a, b json.RawMessage) {
	if sameValue(a, b) {
		return
	}
	start := len(d.ops)
	if d.children(path, a, b) {
		// The parts that changed, unless they say more than the whole.
		n := 0
		for _, op := range d.ops[start:] {
			n += op.size()
		}
		whole := diffOp{Op: "replace", Path: path, Value: b}
		if n <= whole.size() {
			return
		}
		d.ops = d.ops[:start]
	}
	d.ops = append(d.ops, diffOp{Op: "replace", Path: path, Value: b})
}

// children adds the operations that change the members or elements of a
// into b's, if both are objects, or arrays of one length; false if not.
func (d *stateDiff) children(path string, a, b json.RawMessage) bool {
	switch kindOf(a) + kindOf(b) {
	case "{{":
		am, aok := membersOf(a)
		bm, bok := membersOf(b)
		if !aok || !bok {
			return false
		}
		in := make(map[string]json.RawMessage, len(bm))
		for _, m := range bm {
			in[m.key] = m.value
		}
		old := make(map[string]json.RawMessage, len(am))
		var gone []string
		for _, m := range am {
			old[m.key] = m.value
			if _, ok := in[m.key]; !ok {
				gone = append(gone, m.key)
			}
		}
		for _, k := range gone {
			p := path + "/" + escapePointer(k)
			d.ops = append(d.ops, diffOp{Op: "add", Path: p, Value: json.RawMessage("null")}, diffOp{Op: "remove", Path: p})
		}
		for _, m := range bm {
			p := path + "/" + escapePointer(m.key)
			if v, ok := old[m.key]; ok {
				d.diff(p, v, m.value)
			} else {
				d.ops = append(d.ops, diffOp{Op: "add", Path: p, Value: m.value})
			}
		}
		return true
	case "[[":
		var ae, be []json.RawMessage
		if json.Unmarshal(a, &ae) != nil || json.Unmarshal(b, &be) != nil || len(ae) != len(be) {
			return false
		}
		for i := range be {
			d.diff(path+"/"+strconv.Itoa(i), ae[i], be[i])
		}
		return true
	}
	return false
}

// size is about the length of op's JSON.
func (op diffOp) size() int { return len(op.Op) + len(op.Path) + len(op.Value) + 30 }

// kindOf is "{" for an object, "[" for an array, "." for anything else.
func kindOf(v json.RawMessage) string {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) > 0 && (v[0] == '{' || v[0] == '[') {
		return string(v[0])
	}
	return "."
}

type member struct {
	key   string
	value json.RawMessage
}

// membersOf returns an object's members in their order; the last of a
// repeated name wins, as when the object is decoded.
func membersOf(obj json.RawMessage) ([]member, bool) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var out []member
	at := map[string]int{}
	for dec.More() {
		t, err := dec.Token()
		k, ok := t.(string)
		if err != nil || !ok {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		if i, ok := at[k]; ok {
			out[i].value = v
			continue
		}
		at[k] = len(out)
		out = append(out, member{k, v})
	}
	return out, true
}

// sameValue reports whether a and b are the same JSON value.
func sameValue(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
