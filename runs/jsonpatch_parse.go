package runs

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
)

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
			if p.op == "move" && len(p.path) > len(p.from) && slices.Equal(p.path[:len(p.from)], p.from) {
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
