package runs

import (
	"encoding/json"
	"slices"

	tether "github.com/tetherhq/tether"
)

// Machine is the validation state of one thread: its runs and their
// statuses, and for every message its run, role, status, times and tool
// calls. It holds no content (text, metadata), so it stays small enough to
// clone for speculation.
//
// A Machine is not safe for concurrent use.
type Machine struct {
	threadID string
	runs     map[string]*runState
	order    []string // run ids in creation order
	msgs     map[string]*msgState
	th       threadState
	// state is the thread's state (state.snapshot, state.delta), nil
	// while null. It is replaced, never modified in place, so clones and
	// snapshots share it. While work is live (state.delta folded
	// directly), work holds it and state is stale: read it with State.
	state json.RawMessage
	work  stateWork
	// version counts changes, so that a Tx begun before another change
	// (which its overlay does not see) cannot be committed over it.
	version uint64
}

// runState is a run and the ids of its non-terminal messages. A runState
// reachable from a Machine is never modified in place by a Tx: it is
// copied into the overlay first. The elements of running are never
// modified in place (a removal makes a new slice or drops the first), so
// copies may share them; only one holder at a time may append in place,
// into capacity no other holder sees (see appendOwned).
type runState struct {
	run     tether.Run
	running []string
	// answers are the run's requests answered so far, in order; shared
	// by copies, never changed in place (withAnswer).
	answers []answer
}

// msgState is what the state machine knows of a message. Copies share
// tools: it is appended to like runState.running (appendOwned), and its
// elements change in place only while ownTools says no copy shares them.
type msgState struct {
	runID string
	role  tether.Role
	// input marks the run's input: a message created while its run was
	// pending, which only the server does (with run.created).
	input   bool
	status  tether.MessageStatus
	started tether.Time
	updated tether.Time
	tools   []toolState
	// ownTools: the elements of tools are this msgState's alone, so a
	// call's status may change in place. Machine.Clone clears it on both
	// sides; a Tx never changes a status in place but records it
	// (Tx.toolStatus) until Commit.
	ownTools bool
	// calls indexes tools by call id (the first indexed of them) once a
	// message has more than a few calls, so that finding a call costs
	// O(1) whatever their number. A Tx's copy of the message shares the
	// map with the machine and adds its own calls to it: an entry counts
	// only if tools holds that call at that index (see tool).
	calls   map[string]int
	indexed int
}

type toolState struct {
	callID string
	status string
}

// fewTools is the number of tool calls up to which a message's calls are
// found by a scan rather than through an index.
const fewTools = 16

func (ms *msgState) tool(callID string) int {
	if len(ms.tools) > fewTools {
		if ms.calls == nil {
			ms.calls, ms.indexed = make(map[string]int, len(ms.tools)), 0
		}
		for ; ms.indexed < len(ms.tools); ms.indexed++ {
			ms.calls[ms.tools[ms.indexed].callID] = ms.indexed
		}
		i, ok := ms.calls[callID]
		if !ok {
			return -1 // every call of ms is in the map
		}
		if i < len(ms.tools) && ms.tools[i].callID == callID {
			return i
		}
		// The entry is another copy's call at that index (a Tx dropped
		// or not yet committed): rare, so scan.
	}
	// The call being streamed is almost always the latest one.
	for i := len(ms.tools) - 1; i >= 0; i-- {
		if ms.tools[i].callID == callID {
			return i
		}
	}
	return -1
}

// setToolStatus changes the status of call i in place, copying the calls
// first if a copy of the message may share them.
func (ms *msgState) setToolStatus(i int, status string) {
	if !ms.ownTools {
		ms.tools, ms.ownTools = slices.Clone(ms.tools), true
	}
	ms.tools[i].status = status
}

// threadState is what the thread status is derived from, kept up to date so
// that deriving it costs O(1) whatever the number of runs.
type threadState struct {
	active  string   // the running or waiting run; at most one exists
	waiting bool     // active is waiting
	pending []string // pending runs, creation order; shared like runState.running
	last    tether.RunStatus
}

func (t *threadState) status() tether.ThreadStatus {
	switch {
	case t.active != "" && t.waiting:
		return tether.ThreadWaiting
	case t.active != "" || len(t.pending) > 0:
		return tether.ThreadBusy
	case t.last == tether.RunError || t.last == tether.RunAborted:
		return tether.ThreadError
	}
	return tether.ThreadIdle
}

func (t *threadState) activeRunID() string {
	if t.active != "" {
		return t.active
	}
	if len(t.pending) > 0 {
		return t.pending[0]
	}
	return ""
}

// MessageInfo is what a Machine knows of a message besides its content.
type MessageInfo struct {
	ID     string
	RunID  string
	Role   tether.Role
	Status tether.MessageStatus
	// Input is set for the run's input messages: those created while the
	// run was pending (by the server, with the run).
	Input bool
}

// NewMachine returns the machine of an empty thread.
func NewMachine(threadID string) *Machine {
	return &Machine{
		threadID: threadID,
		runs:     make(map[string]*runState),
		msgs:     make(map[string]*msgState),
	}
}

// Clone returns a deep copy of m. Its cost grows with the number of runs and
// messages, so speculate with a Tx where a batch is enough. It notes in m
// that the clone shares m's tool calls, so like every other use of m it
// must not run concurrently with one.
func (m *Machine) Clone() *Machine {
	c := &Machine{
		threadID: m.threadID,
		runs:     make(map[string]*runState, len(m.runs)),
		order:    slices.Clone(m.order),
		msgs:     make(map[string]*msgState, len(m.msgs)),
		th:       m.th,
		state:    m.State(),
	}
	// The copies are full (cap == len), so that an append on either side
	// writes to memory the other does not see.
	c.th.pending = slices.Clip(c.th.pending)
	rs := make([]runState, 0, len(m.runs))
	for id, r := range m.runs {
		rs = append(rs, *r)
		rs[len(rs)-1].running = slices.Clip(r.running)
		c.runs[id] = &rs[len(rs)-1]
	}
	// One allocation for every message instead of one each: threads can
	// hold 100k messages.
	ms := make([]msgState, 0, len(m.msgs))
	for id, s := range m.msgs {
		// Both sides now share the calls' elements; the index stays m's.
		s.ownTools = false
		ms = append(ms, *s)
		cs := &ms[len(ms)-1]
		cs.tools, cs.calls, cs.indexed = slices.Clip(s.tools), nil, 0
		c.msgs[id] = cs
	}
	return c
}

// Begin starts a batch. Events applied to the Tx are seen by its reads but
// not by m until Commit. A Machine has at most one open Tx that will be
// committed: committing one makes the others unusable.
func (m *Machine) Begin() *Tx {
	tx := &Tx{m: m, version: m.version, own: m.th}
	tx.th = &tx.own
	// The Tx appends to its copy of the pending runs in place: the spare
	// capacity becomes the Tx's alone (appendOwned).
	m.th.pending = slices.Clip(m.th.pending)
	return tx
}

// Run returns a copy of the run with the given id.
func (m *Machine) Run(id string) (tether.Run, bool) {
	r, ok := m.runs[id]
	if !ok {
		return tether.Run{}, false
	}
	return copyRun(&r.run), true
}

// Runs returns copies of all runs, in creation order.
func (m *Machine) Runs() []tether.Run {
	out := make([]tether.Run, len(m.order))
	for i, id := range m.order {
		out[i] = copyRun(&m.runs[id].run)
	}
	return out
}

// State returns the thread's state, nil while it is null. It is shared:
// never modify it.
func (m *Machine) State() json.RawMessage {
	if m.work.live {
		m.state = m.work.flush()
	}
	return m.state
}

// ActiveRun returns the running or waiting run, if there is one.
func (m *Machine) ActiveRun() (tether.Run, bool) {
	if m.th.active == "" {
		return tether.Run{}, false
	}
	return m.Run(m.th.active)
}

// NextPending returns the oldest pending run, the next to start, if there
// is one and no run is active.
func (m *Machine) NextPending() (tether.Run, bool) {
	if m.th.active != "" || len(m.th.pending) == 0 {
		return tether.Run{}, false
	}
	return m.Run(m.th.pending[0])
}

// ThreadStatus returns the thread status derived from the runs: busy while a
// run is running or pending, waiting while the active run waits, else error
// if the last run to finish ended error or aborted, else idle.
func (m *Machine) ThreadStatus() tether.ThreadStatus { return m.th.status() }

// ActiveRunID returns the running or waiting run, else the oldest pending
// run, else "".
func (m *Machine) ActiveRunID() string { return m.th.activeRunID() }

// LatestRunID returns the last run created, or "" if there is none.
func (m *Machine) LatestRunID() string {
	if len(m.order) == 0 {
		return ""
	}
	return m.order[len(m.order)-1]
}

// Message returns what the machine knows of a message.
func (m *Machine) Message(id string) (MessageInfo, bool) {
	s, ok := m.msgs[id]
	if !ok {
		return MessageInfo{}, false
	}
	return s.info(id), true
}

// RunningMessages returns the ids of the run's messages that are not
// terminal, in the order they started.
func (m *Machine) RunningMessages(runID string) []string {
	r, ok := m.runs[runID]
	if !ok {
		return nil
	}
	return slices.Clone(r.running)
}

func (s *msgState) info(id string) MessageInfo {
	return MessageInfo{ID: id, RunID: s.runID, Role: s.role, Status: s.status, Input: s.input}
}

// copyRun returns a copy of r that shares no memory a caller could write
// through into the machine, except the bytes of its JSON fields, which are
// read-only by convention like every json.RawMessage of an event.
func copyRun(r *tether.Run) tether.Run {
	c := *r
	if r.Error != nil {
		e := *r.Error
		c.Error = &e
	}
	if r.Request != nil {
		q := *r.Request
		c.Request = &q
	}
	if r.Input.Messages != nil {
		c.Input.Messages = slices.Clone(r.Input.Messages)
	}
	c.Metadata = slices.Clip(r.Metadata)
	return c
}
