package runs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// patcher applies the operations of one patch, in order, to the tree of a
// document; copied counts what its copies added, for maxPatchCopy.
//
// It keeps the size of every container it changes (node.size), and with
// bounded set it refuses any operation that would put a value more than
// maxStateDepth levels deep (errStateDepth): a new write to a thread's
// state, not a fold of one already stored.
type patcher struct {
	root    any
	copied  int
	bounded bool
	// chain holds the containers of the last walk, root first: those
	// whose size a change at its end changes.
	chain []any
}

var (
	errNoPath     = errors.New("names a location that does not exist in the state")
	errNoParent   = errors.New("names a location whose parent does not exist in the state")
	errTestFailed = errors.New("failed: the value differs")
	errCopyLimit  = errors.New("copies more than 1 MiB in one patch")
	errStateDepth = fmt.Errorf("would nest the state more than %d levels deep", maxStateDepth)
	errStateSize  = errors.New("would make the state larger than 8 MiB")
)

// deeper returns errStateDepth if a value v put at path would nest more
// than maxStateDepth levels deep.
func (p *patcher) deeper(path []string, v any) error {
	if !p.bounded {
		return nil
	}
	room := maxStateDepth - len(path) // the levels v may take
	if room < 0 || depthOf(v, max(room, 1)) > room {
		return errStateDepth
	}
	return nil
}

// comma returns the length of the comma before a member or element of a
// container that has n others.
func comma(n int) int {
	if n > 0 {
		return 1
	}
	return 0
}

// grow adds d to the size of the containers of the last walk.
func (p *patcher) grow(d int) {
	for _, c := range p.chain {
		switch c := c.(type) {
		case *node:
			c.size += d
		case *array:
			c.size += d
		}
	}
}

func (p *patcher) apply(op *patchOp) error {
	switch op.op {
	case "add":
		if err := p.deeper(op.path, op.value); err != nil {
			return err
		}
		return p.put(op.path, op.value, true)
	case "replace":
		if _, ok := p.get(op.path); !ok {
			return errNoPath
		}
		if err := p.deeper(op.path, op.value); err != nil {
			return err
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
		// A move no deeper than where the value was cannot nest the state
		// deeper; only one deeper is measured.
		if len(op.path) > len(op.from) {
			if err := p.deeper(op.path, v); err != nil {
				return err
			}
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
		if err := p.deeper(op.path, json.RawMessage(buf.Bytes())); err != nil {
			return err
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
//
// The containers walked through are kept in chain, root first, for grow.
// A raw container expanded on the way may be written out longer than it
// came (a member name with "<" in it comes out as "\u003c"): its parents
// grow as much, so that sizes stay those of what encodeTree writes.
func (p *patcher) walk(path []string) (any, bool) {
	p.chain = p.chain[:0]
	v, err := expand(p.root)
	if err != nil {
		return nil, false
	}
	p.root = v
	for _, tok := range path {
		var x any
		parent := v
		switch c := v.(type) {
		case *node:
			var ok bool
			if x, ok = c.vals[tok]; !ok {
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
			x = c.elems[i]
			if v, err = expand(x); err != nil {
				return nil, false
			}
			c.elems[i] = v
		default:
			return nil, false
		}
		p.chain = append(p.chain, parent)
		if d := sizeOf(v) - sizeOf(x); d != 0 {
			p.grow(d)
		}
	}
	p.chain = append(p.chain, v)
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
		if old, ok := c.vals[tok]; ok {
			p.grow(sizeOf(v) - sizeOf(old))
		} else {
			p.grow(comma(len(c.keys)) + keySize(tok) + 1 + sizeOf(v))
		}
		c.set(tok, v)
	case *array:
		if !insert {
			i, _ := arrayIndex(tok, len(c.elems))
			p.grow(sizeOf(v) - sizeOf(c.elems[i]))
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
		p.grow(comma(len(c.elems)) + sizeOf(v))
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
		old, ok := c.vals[tok]
		if !ok {
			return errNoPath
		}
		p.grow(-(comma(len(c.keys)-1) + keySize(tok) + 1 + sizeOf(old)))
		c.remove(tok)
	case *array:
		i, ok := arrayIndex(tok, len(c.elems))
		if !ok {
			return errNoPath
		}
		p.grow(-(comma(len(c.elems)-1) + sizeOf(c.elems[i])))
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
