package runs

import (
	"bytes"
	"encoding/json"
)

// MergePatch applies an RFC 7396 JSON merge patch to target and returns the
// result: members of an object patch replace those of the target, null
// members remove them, nested objects merge recursively, and a patch that
// is not an object replaces the target whole. A target that is not an
// object is treated as {}. Members keep the target's order, new ones follow
// in the patch's order. The inputs are not modified; if patch is not valid
// JSON, target is returned unchanged.
func MergePatch(target, patch json.RawMessage) json.RawMessage {
	if !json.Valid(patch) {
		return target
	}
	var buf bytes.Buffer
	writeMerged(&buf, target, patch)
	var out bytes.Buffer
	out.Grow(buf.Len())
	if err := json.Compact(&out, buf.Bytes()); err != nil {
		return target // unreachable: writeMerged writes valid JSON
	}
	return out.Bytes()
}

// object is a decoded JSON object that keeps its members' order. A removed
// member keeps its slot with a nil value, so that indexes stay valid.
type object struct {
	keys []string
	vals []json.RawMessage
	idx  map[string]int // built once the object is large, to stay O(n)
}

func (o *object) find(key string) int {
	if o.idx != nil {
		if i, ok := o.idx[key]; ok {
			return i
		}
		return -1
	}
	for i, k := range o.keys {
		if k == key {
			return i
		}
	}
	return -1
}

func (o *object) set(key string, val json.RawMessage) {
	if i := o.find(key); i >= 0 {
		o.vals[i] = val
		return
	}
	o.keys = append(o.keys, key)
	o.vals = append(o.vals, val)
	switch {
	case o.idx != nil:
		o.idx[key] = len(o.keys) - 1
	case len(o.keys) > 16:
		o.idx = make(map[string]int, 2*len(o.keys))
		for i, k := range o.keys {
			o.idx[k] = i
		}
	}
}

// decodeObject decodes a JSON object; a repeated key keeps its first place
// and its last value, as JSON.parse does. It reports false for anything
// but an object.
func decodeObject(raw json.RawMessage) (*object, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	if _, err := dec.Token(); err != nil {
		return nil, false
	}
	o := &object{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, false
		}
		o.set(key, val)
	}
	if _, err := dec.Token(); err != nil {
		return nil, false
	}
	return o, true
}

func writeMerged(buf *bytes.Buffer, target, patch json.RawMessage) {
	p, ok := decodeObject(patch)
	if !ok {
		buf.Write(patch)
		return
	}
	t, ok := decodeObject(target)
	if !ok {
		t = &object{}
	}
	for i, key := range p.keys {
		val := p.vals[i]
		if string(bytes.TrimSpace(val)) == "null" {
			if j := t.find(key); j >= 0 {
				t.vals[j] = nil
			}
			continue
		}
		var old json.RawMessage
		if j := t.find(key); j >= 0 {
			old = t.vals[j]
		}
		var b bytes.Buffer
		writeMerged(&b, old, val)
		t.set(key, b.Bytes())
	}
	buf.WriteByte('{')
	first := true
	for i, key := range t.keys {
		if t.vals[i] == nil {
			continue
		}
		if !first {
			buf.WriteByte(',')
		}
		first = false
		k, _ := json.Marshal(key)
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(t.vals[i])
	}
	buf.WriteByte('}')
}

// metaTree is the metadata of a message being patched by message.updated:
// the merged object kept as a tree (see expand), so that a patch costs
// what it changes, not a decoding and an encoding of the whole metadata
// (a message given 10,000 keys one message.updated at a time cost
// O(n²): 58 s). Its JSON is written out when something reads it. It
// gives what MergePatch gives (TestMetaTreeIsMergePatch).
type metaTree struct{ root *node }

// newMetaTree returns the tree of an object, valid JSON.
func newMetaTree(target json.RawMessage) *metaTree {
	return &metaTree{root: objectNode(compactRaw(target))}
}

// merge applies a merge patch, a JSON object (valid JSON).
func (t *metaTree) merge(patch json.RawMessage) {
	mergeNode(t.root, objectNode(compactRaw(patch)))
}

// encode returns the tree's JSON, compact.
func (t *metaTree) encode() json.RawMessage {
	var buf bytes.Buffer
	_ = encodeTree(&buf, t.root) // never fails: the values are valid JSON
	return buf.Bytes()
}

func compactRaw(raw json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	buf.Grow(len(raw))
	if json.Compact(&buf, raw) != nil {
		return nil
	}
	return buf.Bytes()
}

// objectNode returns raw split one level if it is a JSON object, else an
// empty object (as MergePatch treats a target that is not one).
func objectNode(raw json.RawMessage) *node {
	if v, err := expand(raw); err == nil {
		if n, ok := v.(*node); ok {
			return n
		}
	}
	return &node{vals: make(map[string]any)}
}

// mergeNode merges patch into target as RFC 7396 says: null removes a
// member, an object merges into the member (an object, or {} if it is
// not one), anything else replaces it.
func mergeNode(target, patch *node) {
	for _, key := range patch.keys {
		raw, _ := patch.vals[key].(json.RawMessage) // expand leaves members raw
		switch {
		case string(raw) == "null":
			if _, ok := target.vals[key]; ok {
				target.remove(key)
			}
		case len(raw) > 0 && raw[0] == '{':
			var member *node
			if old, ok := target.vals[key]; ok {
				if v, err := expand(old); err == nil {
					member, _ = v.(*node)
				}
			}
			if member == nil {
				member = &node{vals: make(map[string]any)}
			}
			mergeNode(member, objectNode(raw))
			target.set(key, member)
		default:
			target.set(key, raw)
		}
	}
}
