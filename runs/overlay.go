package runs

import "slices"

// A Tx reads the machine's runs and messages through its overlay: the
// copies of those its events changed, made on first write (ownRun,
// ownMsg), and the tool call statuses it set (setToolStatus), which
// Commit moves into the machine. Writing through (Tx.direct), it writes
// the machine's own.

// toolRef names a tool call by its message and index in the message's calls.
type toolRef struct {
	msg string
	i   int
}

func (tx *Tx) run(id string) *runState {
	if r, ok := tx.runs[id]; ok {
		return r
	}
	return tx.m.runs[id]
}

func (tx *Tx) msg(id string) *msgState {
	if s, ok := tx.msgs[id]; ok {
		return s
	}
	return tx.m.msgs[id]
}

// ownRun returns a run the Tx may write: r itself when writing through,
// else the overlay's copy, made on first use.
func (tx *Tx) ownRun(id string, r *runState) *runState {
	if tx.direct {
		return r
	}
	if o, ok := tx.runs[id]; ok {
		return o
	}
	c := *r
	// The copy appends to running in place: its spare capacity becomes
	// the copy's alone (appendOwned).
	r.running = slices.Clip(r.running)
	tx.putRun(id, &c)
	return &c
}

func (tx *Tx) putRun(id string, r *runState) {
	if tx.direct {
		tx.m.runs[id] = r
		return
	}
	if tx.runs == nil {
		tx.runs = make(map[string]*runState)
	}
	tx.runs[id] = r
	tx.touched = append(tx.touched, id)
}

func (tx *Tx) ownMsg(id string, s *msgState) *msgState {
	if tx.direct {
		return s
	}
	if o, ok := tx.msgs[id]; ok {
		return o
	}
	c := *s
	// As for runs: the copy appends to tools in place (appendOwned). It
	// shares their elements with s until Commit drops s.
	s.tools = slices.Clip(s.tools)
	tx.putMsg(id, &c)
	return &c
}

// toolStatus returns the status of call i of message id as the Tx sees it.
func (tx *Tx) toolStatus(id string, s *msgState, i int) string {
	if st, ok := tx.statuses[toolRef{id, i}]; ok {
		return st
	}
	return s.tools[i].status
}

// setToolStatus changes the status of call i of message id, s being the
// Tx's own copy of the message: in place when writing through, else
// recorded for Commit.
func (tx *Tx) setToolStatus(id string, s *msgState, i int, st string) {
	if tx.direct {
		s.setToolStatus(i, st)
		return
	}
	if tx.statuses == nil {
		tx.statuses = make(map[toolRef]string)
	}
	tx.statuses[toolRef{id, i}] = st
}

func (tx *Tx) putMsg(id string, s *msgState) {
	if tx.direct {
		tx.m.msgs[id] = s
		return
	}
	if tx.msgs == nil {
		tx.msgs = make(map[string]*msgState)
	}
	tx.msgs[id] = s
}

// appendOwned: the lists of ids a Machine shares with its clones and its
// Tx (pending runs, a run's running messages) are appended to in place, so
// that a thread of n pending runs or a run of n open messages costs O(n),
// not O(n²) as a copy per append did. This is safe because one holder at a
// time owns the capacity past a list's end: Machine.Clone gives the clone
// full copies (cap == len), and a Tx taking a copy (Begin, ownRun) clips
// the machine's, so that the machine's next append copies instead of
// writing over the Tx's. Elements are never modified in place.

// without returns ids without id, never modifying the elements of ids,
// since they may be shared with a machine or another Tx. The first id (the
// oldest pending run, the first message started, the usual one to go) is
// dropped by slicing, in O(1); any other makes a new slice.
func without(ids []string, id string) []string {
	i := slices.Index(ids, id)
	if i < 0 {
		return ids
	}
	if i == 0 {
		return ids[1:]
	}
	out := make([]string, 0, len(ids)-1)
	out = append(out, ids[:i]...)
	return append(out, ids[i+1:]...)
}
