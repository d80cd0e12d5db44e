package runs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// stateWork is a thread's state while state.delta patches it: the tree the
// patches are applied to (see applyCompact), kept from one delta to the
// next, so that a delta costs what it changes instead of a scan and a copy
// of the whole state (8,000 deltas that each add a key, in one append,
// cost O(n²): 14 s to check, as much again to fold). The state's JSON is
// written out when something reads it (flush), or once the patches since
// it was last written out are as large as it was, so that what is kept to
// start again from stays within twice the state.
//
// base is the state the tree started from and patches what was applied
// since: a patch that fails halfway has changed the tree already, so the
// tree is built again from them.
//
// A Machine lends its live work to the Tx that patches the state next, so
// that a delta per append costs what it changes too: the Tx's Commit gives
// it back. lent marks a machine's work whose tree a Tx has (and may have
// changed): the machine builds its own again before it uses it.
type stateWork struct {
	live    bool
	lent    bool
	tree    any // the patcher's root; nil is null
	base    json.RawMessage
	patches [][]patchOp
	pending int // bytes of the patches
}

// apply applies a patch of size bytes (its JSON) to the state, which is
// base if w is not live. On error, w is as it was. bounded holds the
// state to maxStateBytes and maxStateDepth (a new write, not a fold): the
// error is then errStateSize or errStateDepth (wrapped) where the patch
// would take it past them. The size is kept in the tree as it changes, so
// checking it costs what the patch changes; a patch that leaves a state
// stored before the bound over it is refused only if it grows it.
func (w *stateWork) apply(base json.RawMessage, ops []patchOp, size int, bounded bool) error {
	if !w.live {
		w.start(base)
	}
	p := patcher{root: w.tree, bounded: bounded}
	before := sizeOf(p.root)
	for i := range ops {
		if err := p.apply(&ops[i]); err != nil {
			w.rebuild()
			if err == errStateDepth {
				return fmt.Errorf("operation %d (%s) %w", i, ops[i].op, err)
			}
			return patchError(i, "("+ops[i].op+") "+err.Error())
		}
	}
	if after := sizeOf(p.root); bounded && after > maxStateBytes && after > before {
		w.rebuild()
		return errStateSize
	}
	w.tree = p.root
	w.patches = append(w.patches, ops)
	w.pending += size
	return nil
}

// lend returns w for a Tx to patch, marking w lent. The Tx appends to the
// patches in place (appendOwned): w keeps its own list, clipped.
func (w *stateWork) lend() stateWork {
	if w.lent {
		w.rebuild()
	}
	out := *w
	w.patches = slices.Clip(w.patches)
	w.lent = true
	return out
}

// due reports whether the state should be written out (flush) to bound
// what w keeps.
func (w *stateWork) due() bool { return w.live && w.pending > len(w.base)+64<<10 }

func (w *stateWork) start(base json.RawMessage) {
	*w = stateWork{live: true, base: base}
	if base != nil {
		w.tree = base
	}
}

// rebuild builds the tree again from base and the patches applied since.
func (w *stateWork) rebuild() {
	patches, pending := w.patches, w.pending // w.lent is cleared too
	w.start(w.base)
	for _, ops := range patches {
		p := patcher{root: w.tree}
		for i := range ops {
			_ = p.apply(&ops[i]) // it applied before, to the same tree
		}
		w.tree = p.root
	}
	w.patches, w.pending = patches, pending
}

// flush returns the state's JSON (nil for null) and leaves w empty.
func (w *stateWork) flush() json.RawMessage {
	if w.lent {
		w.rebuild()
	}
	var buf bytes.Buffer
	buf.Grow(len(w.base) + w.pending + 64)
	_ = encodeTree(&buf, w.tree) // never fails: the tree holds valid JSON
	*w = stateWork{}
	if out := buf.Bytes(); string(out) != "null" {
		return out
	}
	return nil
}
