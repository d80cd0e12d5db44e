package runs

import (
	"bytes"
	"encoding/json"
	"errors"
)

// The tree of a document being patched: *node for an object, *array for
// an array, and json.RawMessage for any value not yet looked into (a
// scalar, or a container no path went through). nil is null.
type node struct {
	keys []string // in order; a key is in vals iff it is in keys
	vals map[string]any
}

type array struct{ elems []any }

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
		n := &node{vals: make(map[string]any)}
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
			n.set(key, json.RawMessage(b[i:vend:vend]))
			if i = skipSpace(b, vend); i < len(b) && b[i] == ',' {
				i = skipSpace(b, i+1)
			}
		}
		return n, nil
	}
	a := &array{elems: []any{}}
	for i = skipSpace(b, i+1); i < len(b) && b[i] != ']'; {
		vend := skipValue(b, i)
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
