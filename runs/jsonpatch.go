package runs

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
)

// A thread's state is changed by state.delta events carrying an RFC 6902
// JSON Patch. It is applied here, on the state decoded into a tree that
// keeps the order of object members and the text of numbers, so that what
// a patch does not touch comes out as it went in.
//
// Not a library: github.com/evanphx/json-patch, the one Go programs use,
// was tried and refused for what its tests do not cover and a state must
// survive: its test operation panics on an array holding null, passes a
// test of null on a missing member, reads a "from" ending in "/" (the
// member named "") as its parent and moves null instead, and reads array
// indexes with strconv.Atoi ("01", "+1"). The TypeScript reducer
// (web/client/src/jsonpatch.ts) applies patches the same way; the vectors
// in testdata/jsonpatch hold both to it.
//
// Where the RFC leaves a choice: the state may be any JSON value, and
// null before it is first set; operations on the root ("") replace it
// (add, replace), compare it (test) or make it null (remove). Numbers are
// equal for test when their float64 values are (the TypeScript reducer's
// numbers). The copies of one patch may add at most maxPatchCopy bytes,
// so that a small patch cannot double the state at every operation.

// maxPatchCopy bounds what the copy operations of one patch may add.
const maxPatchCopy = 1 << 20

// patchOp is one operation: the members RFC 6902 gives a meaning to.
// Others are ignored, as the RFC says.
type patchOp struct {
	op         string
	path, from []string // decoded JSON Pointers; nil is the root
	value      json.RawMessage
}

// parsePatch checks that raw is a JSON Patch: an array of operations, each
// an object with an op of the six, a path that is a JSON Pointer, a from
// for move and copy, a value for add, replace and test, and no move into
// its own child. The error says what is wrong, for a bad_request.
func parsePatch(raw json.RawMessage) ([]patchOp, error) {
	var items []json.RawMessage
	if !bytes.HasPrefix(bytes.TrimLeft(raw, " \t\r\n"), []byte("[")) || json.Unmarshal(raw, &items) != nil {
		return nil, errors.New("must be a JSON array of operations")
	}
	ops := make([]patchOp, len(items))
	for i, item := range items {
		var m map[string]json.RawMessage
		if !bytes.HasPrefix(bytes.TrimLeft(item, " \t\r\n"), []byte("{")) || json.Unmarshal(item, &m) != nil {
			return nil, patchError(i, "is not an object")
		}
		p := &ops[i]
		var err error
		if p.op, err = stringMember(m, "op"); err != nil {
			return nil, patchError(i, err.Error())
		}
		switch p.op {
		case "add", "remove", "replace", "move", "copy", "test":
		default:
			return nil, patchError(i, `has an "op" that is not add, remove, replace, move, copy or test`)
		}
		if p.path, err = pointerMember(m, "path"); err != nil {
			return nil, patchError(i, err.Error())
		}
		switch p.op {
		case "move", "copy":
			if p.from, err = pointerMember(m, "from"); err != nil {
				return nil, patchError(i, err.Error())
			}
			if p.op == "move" && len(p.path) > len(p.from) && equalTokens(p.path[:len(p.from)], p.from) {
				return nil, patchError(i, "moves a value into its own child")
			}
		case "add", "replace", "test":
			v, ok := m["value"]
			if !ok {
				return nil, patchError(i, `has no "value"`)
			}
			p.value = v
		}
	}
	return ops, nil
}

func patchError(i int, what string) error {
	return errors.New("operation " + strconv.Itoa(i) + " " + what)
}

func stringMember(m map[string]json.RawMessage, name string) (string, error) {
	raw, ok := m[name]
	if !ok {
		return "", errors.New(`has no "` + name + `"`)
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", errors.New(`has a "` + name + `" that is not a string`)
	}
	return s, nil
}

func pointerMember(m map[string]json.RawMessage, name string) ([]string, error) {
	s, err := stringMember(m, name)
	if err != nil {
		return nil, err
	}
	toks, ok := parsePointer(s)
	if !ok {
		return nil, errors.New(`has a "` + name + `" that is not a JSON Pointer`)
	}
	return toks, nil
}

// parsePointer decodes an RFC 6901 JSON Pointer: empty (the root, nil), or
// "/"-separated tokens in which "~" is always followed by 0 or 1.
func parsePointer(p string) ([]string, bool) {
	if p == "" {
		return nil, true
	}
	if p[0] != '/' {
		return nil, false
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		if !strings.Contains(t, "~") {
			continue
		}
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, false
			}
		}
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks, true
}

func equalTokens(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// applyPatch applies a patch that parsePatch accepted to doc (nil for
// null) and returns the new document (nil for null). The error, for a
// conflict, says which operation does not apply and why. doc is not
// modified.
func applyPatch(doc json.RawMessage, ops []patchOp) (json.RawMessage, error) {
	if len(ops) == 0 {
		return doc, nil
	}
	var root any
	if doc != nil {
		var err error
		if root, err = decodeTree(doc); err != nil {
			return nil, errors.New("the state is not valid JSON")
		}
	}
	p := patcher{root: root}
	for i := range ops {
		if err := p.apply(&ops[i]); err != nil {
			return nil, patchError(i, "("+ops[i].op+") "+err.Error())
		}
	}
	if p.root == nil {
		return nil, nil
	}
	var buf bytes.Buffer
	buf.Grow(len(doc) + 64)
	encodeTree(&buf, p.root)
	return buf.Bytes(), nil
}

// The tree of a decoded document: *node for objects, []any for arrays,
// string, json.Number, bool, and nil for null.
type node struct {
	keys []string // in order; a key is in vals iff it is in keys
	vals map[string]any
}

func (n *node) index(key string) int {
	for i, k := range n.keys {
		if k == key {
			return i
		}
	}
	return -1
}

// set sets a member, keeping its place if it exists, else adding it last.
func (n *node) set(key string, v any) {
	if _, ok := n.vals[key]; !ok {
		n.keys = append(n.keys, key)
	}
	n.vals[key] = v
}

func (n *node) remove(key string) {
	i := n.index(key)
	n.keys = append(n.keys[:i], n.keys[i+1:]...)
	delete(n.vals, key)
}

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
	case "add", "replace":
		v, err := decodeTree(op.value)
		if err != nil {
			return err
		}
		if op.op == "replace" {
			if _, ok := p.get(op.path); !ok {
				return errNoPath
			}
		}
		return p.put(op.path, v, op.op == "add")
	case "remove":
		return p.remove(op.path)
	case "move":
		if equalTokens(op.from, op.path) {
			_, ok := p.get(op.from)
			if !ok {
				return errNoPath
			}
			return nil
		}
		v, ok := p.get(op.from)
		if !ok {
			return errNoPath
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
		var buf bytes.Buffer
		encodeTree(&buf, v)
		if p.copied += buf.Len(); p.copied > maxPatchCopy {
			return errCopyLimit
		}
		c, _ := decodeTree(buf.Bytes()) // a deep copy
		return p.put(op.path, c, true)
	case "test":
		want, err := decodeTree(op.value)
		if err != nil {
			return err
		}
		got, ok := p.get(op.path)
		if !ok {
			return errNoPath
		}
		if !equalTree(got, want) {
			return errTestFailed
		}
	}
	return nil
}

// arrayIndex reads an array index token: "0" or digits without a leading
// zero (RFC 6901 §4), below n.
func arrayIndex(tok string, n int) (int, bool) {
	if tok == "" || len(tok) > 1 && tok[0] == '0' {
		return 0, false
	}
	i := 0
	for j := 0; j < len(tok); j++ {
		c := tok[j]
		if c < '0' || c > '9' || i > (n-int(c-'0'))/10 {
			return 0, false
		}
		i = i*10 + int(c-'0')
	}
	return i, i < n
}

func child(v any, tok string) (any, bool) {
	switch c := v.(type) {
	case *node:
		x, ok := c.vals[tok]
		return x, ok
	case []any:
		i, ok := arrayIndex(tok, len(c))
		if !ok {
			return nil, false
		}
		return c[i], true
	}
	return nil, false
}

func (p *patcher) get(path []string) (any, bool) {
	v := p.root
	for _, tok := range path {
		var ok bool
		if v, ok = child(v, tok); !ok {
			return nil, false
		}
	}
	return v, true
}

// parent returns the container the last token of path is in, and the
// setter that replaces that container where it is (arrays grow by
// replacement).
func (p *patcher) parent(path []string) (any, func(any), bool) {
	set := func(v any) { p.root = v }
	v := p.root
	for _, tok := range path[:len(path)-1] {
		next, ok := child(v, tok)
		if !ok {
			return nil, nil, false
		}
		switch c := v.(type) {
		case *node:
			set = func(x any) { c.vals[tok] = x }
		case []any:
			i, _ := arrayIndex(tok, len(c))
			set = func(x any) { c[i] = x }
		}
		v = next
	}
	return v, set, true
}

// put adds (insert: add, move, copy) or replaces the value at path.
func (p *patcher) put(path []string, v any, insert bool) error {
	if len(path) == 0 {
		p.root = v
		return nil
	}
	c, set, ok := p.parent(path)
	if !ok {
		return errNoParent
	}
	tok := path[len(path)-1]
	switch c := c.(type) {
	case *node:
		c.set(tok, v)
	case []any:
		if !insert {
			i, _ := arrayIndex(tok, len(c))
			c[i] = v
			return nil
		}
		i := len(c)
		if tok != "-" {
			var ok bool
			if i, ok = arrayIndex(tok, len(c)+1); !ok {
				return errors.New("names an array index past the end")
			}
		}
		set(append(c[:i:i], append([]any{v}, c[i:]...)...))
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
	c, set, ok := p.parent(path)
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
	case []any:
		i, ok := arrayIndex(tok, len(c))
		if !ok {
			return errNoPath
		}
		set(append(c[:i:i], c[i+1:]...))
	default:
		return errNoPath
	}
	return nil
}

// equalTree compares values as RFC 6902 §4.6 says: objects whatever the
// order of their members, numbers by value.
func equalTree(a, b any) bool {
	switch x := a.(type) {
	case *node:
		y, ok := b.(*node)
		if !ok || len(x.vals) != len(y.vals) {
			return false
		}
		for k, v := range x.vals {
			w, ok := y.vals[k]
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

// decodeTree decodes one JSON value into a tree.
func decodeTree(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &node{vals: make(map[string]any)}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				n.set(kt.(string), v)
			}
			_, err := dec.Token()
			return n, err
		case '[':
			a := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := dec.Token()
			return a, err
		}
		return nil, errors.New("unexpected delimiter")
	}
	return t, nil // string, json.Number, bool, nil
}

func encodeTree(buf *bytes.Buffer, v any) {
	switch x := v.(type) {
	case *node:
		buf.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k)
			buf.WriteByte(':')
			encodeTree(buf, x.vals[k])
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			encodeTree(buf, e)
		}
		buf.WriteByte(']')
	case string:
		writeString(buf, x)
	case json.Number:
		buf.WriteString(string(x))
	case bool:
		buf.WriteString(strconv.FormatBool(x))
	default:
		buf.WriteString("null")
	}
}

func writeString(buf *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // never fails for a string
	buf.Write(b)
}

// ApplyPatch applies an RFC 6902 JSON Patch to doc exactly as state.delta
// does (nil doc and result for null), for those who follow a thread's
// state outside a State, like an agent that sends it upstream. The error
// is a *tether.Error: bad_request for a malformed patch, conflict for one
// that does not apply.
func ApplyPatch(doc, patch json.RawMessage) (json.RawMessage, error) {
	ops, err := parsePatch(patch)
	if err != nil {
		return nil, badRequest("not a JSON Patch (RFC 6902): %v", err)
	}
	out, err := applyPatch(doc, ops)
	if err != nil {
		return nil, conflict("the patch does not apply: %v", err)
	}
	return out, nil
}
