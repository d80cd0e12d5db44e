package runs

import (
	"bytes"
	"encoding/json"
	"errors"
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
			var c bytes.Buffer
			_ = json.Compact(&c, v) // valid: it was unmarshaled
			p.value = c.Bytes()
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
//
// The document is decoded lazily: a container is split into its members
// (kept as raw JSON) only when a path goes through it, and what no path
// touches is copied out as it came in, so a delta costs a scan of the
// state, not a decoding of it.
func applyPatch(doc json.RawMessage, ops []patchOp) (json.RawMessage, error) {
	if doc != nil {
		var c bytes.Buffer
		c.Grow(len(doc))
		if err := json.Compact(&c, doc); err != nil {
			return nil, errors.New("the state is not valid JSON")
		}
		doc = c.Bytes()
	}
	return applyCompact(doc, ops)
}

// applyCompact is applyPatch on a document known to be valid and compact,
// as a thread's state always is (state.snapshot compacts it, and patches
// keep it so): every raw value of the tree is then compact and is written
// out as it is, and the cost of a patch is one scan of the state and a
// copy of it.
func applyCompact(doc json.RawMessage, ops []patchOp) (json.RawMessage, error) {
	if len(ops) == 0 {
		return doc, nil
	}
	var root any
	if doc != nil {
		root = doc
	}
	p := patcher{root: root}
	for i := range ops {
		if err := p.apply(&ops[i]); err != nil {
			return nil, patchError(i, "("+ops[i].op+") "+err.Error())
		}
	}
	var buf bytes.Buffer
	buf.Grow(len(doc) + 64)
	if err := encodeTree(&buf, p.root); err != nil {
		return nil, errors.New("the patch makes an invalid document")
	}
	if out := buf.Bytes(); string(out) != "null" {
		return out, nil
	}
	return nil, nil
}

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
		if equalTokens(op.from, op.path) {
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
