package runs

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/tetherhq/tether/internal/nest"
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

// maxStateBytes and maxStateDepth bound a thread's state (its compact
// JSON) for new writes: a state.snapshot or state.delta that would make it
// larger or deeper is too_large. Each patch is small and shallow (a body
// is at most --max-body and 256 levels), but patches add up: 100-byte
// copies add 1 MiB each, and a value added at the end of a deep path
// nests deeper than any body, past what readers decode (Python's json
// stops near 1,000 levels). The state is in memory for every thread a
// node holds and in every snapshot sent, so its bound is a few bodies'
// worth. Its depth is one level less than a body's: a front end sends the
// state back inside its request (AG-UI's RunAgentInput.state, one level
// in), so a state that the bodies' bound would refuse there is refused
// where it comes in, not at every later run. A log stored before the
// bound still folds: only Tx checks it.
const (
	maxStateBytes = 8 << 20
	maxStateDepth = nest.Max - 1
)

// CheckState returns the error a state.snapshot of state gets for its
// value alone: bad_request if it is not JSON, too_large if its compact
// JSON is over 8 MiB or nests deeper than 255 levels. A caller that must
// write nothing when the snapshot would be refused checks it first.
func CheckState(state json.RawMessage) error {
	var c bytes.Buffer
	if err := json.Compact(&c, state); err != nil {
		return badRequest("the state is not valid JSON")
	}
	if !stateWithin(c.Bytes()) {
		return tooLarge("the state is larger than 8 MiB or nested more than %d levels deep", maxStateDepth)
	}
	return nil
}

// stateWithin reports whether a compact state is within the bounds.
func stateWithin(compact []byte) bool {
	return len(compact) <= maxStateBytes && nest.Within(compact, maxStateDepth)
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
