package runs

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/tetherhq/tether/internal/nest"
)

// The tree of a document being patched: *node for an object, *array for
// an array, and json.RawMessage for any value not yet looked into (a
// scalar, or a container no path went through). nil is null.
//
// size is the length of the container's JSON as encodeTree writes it,
// set by expand and kept by the patcher as it changes the tree, so that a
// thread's state is measured at the cost of what a patch changes, not a
// scan of it (maxStateBytes). Merge patches (metaTree) do not keep it.
type node struct {
	keys []string // in order; a key is in vals iff it is in keys
	vals map[string]any
	size int
}

type array struct {
	elems []any
	size  int
}

// sizeOf returns the length of v's JSON as encodeTree writes it.
func sizeOf(v any) int {
	switch x := v.(type) {
	case *node:
		return x.size
	case *array:
		return x.size
	case json.RawMessage:
		return len(x)
	}
	return len("null")
}

// keySize returns the length of key's JSON as encodeTree writes it.
func keySize(key string) int {
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(key) // never fails for a string
			return len(b)
		}
	}
	return len(key) + 2
}

// depthOf returns how deep v's arrays and objects nest (0 for a scalar)
// if that is at most stop (> 0), else some depth over stop: it stops
// looking there, as nest.Depth does.
func depthOf(v any, stop int) int {
	var elems func(yield func(any) bool)
	switch x := v.(type) {
	case *node:
		elems = func(yield func(any) bool) {
			for _, k := range x.keys {
				if !yield(x.vals[k]) {
					return
				}
			}
		}
	case *array:
		elems = func(yield func(any) bool) {
			for _, e := range x.elems {
				if !yield(e) {
					return
				}
			}
		}
	case json.RawMessage:
		return nest.Depth(x, stop)
	default:
		return 0
	}
	d := 0
	for e := range elems {
		if d = max(d, depthOf(e, max(stop-1, 1))); d >= stop {
			break
		}
	}
	return d + 1
}

// set sets a member, keeping its place if it exists, else adding it last.
func (n *node) set(key string, v any) {
	if _, ok := n.vals[key]; !ok {
		n.keys = append(n.keys, key)
	}
	n.vals[key] = v
}

func (n *node) remove(key string) {
	for i, k := range n.keys {
		if k == key {
			n.keys = append(n.keys[:i], n.keys[i+1:]...)
			break
		}
	}
	delete(n.vals, key)
}

// expand returns v split one level if it is a raw object or array (its
// members raw, sharing v's bytes), else v. Raw values are valid JSON (the
// state is checked once, values come from parsed patches or from
// encodeTree), so a scan that skips over values is enough.
func expand(v any) (any, error) {
	raw, ok := v.(json.RawMessage)
	if !ok {
		return v, nil
	}
	b := []byte(raw)
	i := skipSpace(b, 0)
	if i == len(b) || (b[i] != '{' && b[i] != '[') {
		return v, nil
	}
	if b[i] == '{' {
		n := &node{vals: make(map[string]any), size: 2}
		for i = skipSpace(b, i+1); i < len(b) && b[i] != '}'; {
			end := skipString(b, i)
			key := string(b[i+1 : end-1])
			if bytes.IndexByte(b[i:end], '\\') >= 0 {
				if err := json.Unmarshal(b[i:end], &key); err != nil {
					return nil, err
				}
			}
			i = skipSpace(b, end)
			if i == len(b) || b[i] != ':' {
				return nil, errors.New("invalid JSON")
			}
			i = skipSpace(b, i+1)
			vend := skipValue(b, i)
			if len(n.keys) > 0 {
				n.size++
			}
			n.size += keySize(key) + 1 + vend - i
			n.set(key, json.RawMessage(b[i:vend:vend]))
			if i = skipSpace(b, vend); i < len(b) && b[i] == ',' {
				i = skipSpace(b, i+1)
			}
		}
		return n, nil
	}
	a := &array{elems: []any{}, size: 2}
	for i = skipSpace(b, i+1); i < len(b) && b[i] != ']'; {
		vend := skipValue(b, i)
		if len(a.elems) > 0 {
			a.size++
		}
		a.size += vend - i
		a.elems = append(a.elems, json.RawMessage(b[i:vend:vend]))
		if i = skipSpace(b, vend); i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return a, nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index past the string that starts at b[i].
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index past the value that starts at b[i].
func skipValue(b []byte, i int) int {
	if i == len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i
}

// encodeTree writes a tree as compact JSON. Its raw values are compact
// already.
func encodeTree(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case *node:
		buf.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			b, _ := json.Marshal(k) // never fails for a string
			buf.Write(b)
			buf.WriteByte(':')
			if err := encodeTree(buf, x.vals[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case *array:
		buf.WriteByte('[')
		for i, e := range x.elems {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := encodeTree(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case json.RawMessage:
		buf.Write(x) // compact: see applyPatch and parsePatch
	default:
		buf.WriteString("null")
	}
	return nil
}
