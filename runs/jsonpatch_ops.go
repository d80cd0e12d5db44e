package runs

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
)

// patcher applies the operations of one patch, in order, to the tree of a
// document; copied counts what its copies added, for maxPatchCopy.
type patcher struct {
	root   any
	copied int
}

var (
	errNoPath     = errors.New("names a location that does not exist in the state")
	errNoParent   = errors.New("names a location whose parent does not exist in the state")
	errTestFailed = errors.New("failed: the value differs")
	errCopyLimit  = errors.New("copies more than 1 MiB in one patch")
)

func (p *patcher) apply(op *patchOp) error {
	switch op.op {
	case "add":
		return p.put(op.path, op.value, true)
	case "replace":
		if _, ok := p.get(op.path); !ok {
			return errNoPath
		}
		return p.put(op.path, op.value, false)
	case "remove":
		return p.remove(op.path)
	case "move":
		v, ok := p.get(op.from)
		if !ok {
			return errNoPath
		}
		if slices.Equal(op.from, op.path) {
			return nil
		}
		if err := p.remove(op.from); err != nil {
			return err
		}
		return p.put(op.path, v, true)
	case "copy":
		v, ok := p.get(op.from)
		if !ok {
			return errNoPath
		}
		// The copy is the value's JSON: shared with nothing that a later
		// operation changes.
		var buf bytes.Buffer
		if err := encodeTree(&buf, v); err != nil {
			return err
		}
		if p.copied += buf.Len(); p.copied > maxPatchCopy {
			return errCopyLimit
		}
		return p.put(op.path, json.RawMessage(buf.Bytes()), true)
	case "test":
		got, ok := p.get(op.path)
		if !ok {
			return errNoPath
		}
		var buf bytes.Buffer
		if err := encodeTree(&buf, got); err != nil {
			return err
		}
		a, err1 := decodeFull(buf.Bytes())
		b, err2 := decodeFull(op.value)
		if err1 != nil || err2 != nil || !equalTree(a, b) {
			return errTestFailed
		}
	}
	return nil
}

// walk returns the container path names (expanded, and stored expanded
// where it is, so that changes to it are changes to the document), or
// false if it does not exist or is not a container.
func (p *patcher) walk(path []string) (any, bool) {
	v, err := expand(p.root)
	if err != nil {
		return nil, false
	}
	p.root = v
	for _, tok := range path {
		switch c := v.(type) {
		case *node:
			x, ok := c.vals[tok]
			if !ok {
				return nil, false
			}
			if v, err = expand(x); err != nil {
				return nil, false
			}
			c.vals[tok] = v
		case *array:
			i, ok := arrayIndex(tok, len(c.elems))
			if !ok {
				return nil, false
			}
			if v, err = expand(c.elems[i]); err != nil {
				return nil, false
			}
			c.elems[i] = v
		default:
			return nil, false
		}
	}
	return v, true
}

// get returns the value at path.
func (p *patcher) get(path []string) (any, bool) {
	if len(path) == 0 {
		return p.root, true
	}
	c, ok := p.walk(path[:len(path)-1])
	if !ok {
		return nil, false
	}
	tok := path[len(path)-1]
	switch c := c.(type) {
	case *node:
		x, ok := c.vals[tok]
		return x, ok
	case *array:
		i, ok := arrayIndex(tok, len(c.elems))
		if !ok {
			return nil, false
		}
		return c.elems[i], true
	}
	return nil, false
}

// put adds (insert: add, move, copy) or replaces the value at path.
func (p *patcher) put(path []string, v any, insert bool) error {
	if len(path) == 0 {
		p.root = v
		return nil
	}
	c, ok := p.walk(path[:len(path)-1])
	if !ok {
		return errNoParent
	}
	tok := path[len(path)-1]
	switch c := c.(type) {
	case *node:
		c.set(tok, v)
	case *array:
		if !insert {
			i, _ := arrayIndex(tok, len(c.elems))
			c.elems[i] = v
			return nil
		}
		i := len(c.elems)
		if tok != "-" {
			var ok bool
			if i, ok = arrayIndex(tok, len(c.elems)+1); !ok {
				return errors.New("names an array index past the end")
			}
		}
		c.elems = append(c.elems, nil)
		copy(c.elems[i+1:], c.elems[i:])
		c.elems[i] = v
	default:
		return errNoParent
	}
	return nil
}

func (p *patcher) remove(path []string) error {
	if len(path) == 0 {
		p.root = nil
		return nil
	}
	c, ok := p.walk(path[:len(path)-1])
	if !ok {
		return errNoPath
	}
	tok := path[len(path)-1]
	switch c := c.(type) {
	case *node:
		if _, ok := c.vals[tok]; !ok {
			return errNoPath
		}
		c.remove(tok)
	case *array:
		i, ok := arrayIndex(tok, len(c.elems))
		if !ok {
			return errNoPath
		}
		c.elems = append(c.elems[:i], c.elems[i+1:]...)
	default:
		return errNoPath
	}
	return nil
}

// decodeFull decodes a value for comparison: objects as maps, numbers as
// json.Number.
func decodeFull(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// equalTree compares decoded values as RFC 6902 §4.6 says: objects
// whatever the order of their members, numbers by value.
func equalTree(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !equalTree(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalTree(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		if x == y {
			return true
		}
		fx, err1 := strconv.ParseFloat(string(x), 64)
		fy, err2 := strconv.ParseFloat(string(y), 64)
		return err1 == nil && err2 == nil && fx == fy
	}
	return a == b // strings, booleans, null
}
