package runs

import (
	"bytes"
	"encoding/json"
	"errors"

	tether "github.com/tetherhq/tether"
)

// Tx is a batch of events applied on top of a Machine. The machine is not
// changed until Commit; reads through the Tx see the batch. The Tx keeps
// copies of only the runs and messages its events touch, so its cost is
// that of the batch, not of the thread. Dropping a Tx without Commit
// discards it.
type Tx struct {
	m       *Machine
	version uint64
	// direct makes the Tx write to the machine itself: the State folds
	// committed events this way, without an overlay to allocate.
	direct bool
	done   bool

	runs    map[string]*runState
	msgs    map[string]*msgState
	touched []string // runs created or changed, first touch first
	created []string // runs created, in order
	th      *threadState
	own     threadState
	// state is the thread's state after the Tx, if stateSet (in work
	// while that is live).
	state    json.RawMessage
	stateSet bool
	work     stateWork
	// statuses holds the tool calls whose status the Tx changed, set in
	// the messages' calls at Commit: a Tx never writes a status in place,
	// since its copy of a message shares the calls with the machine, and
	// copying them all for each status would make a message of n calls
	// cost O(n²).
	statuses map[toolRef]string
}

// Apply checks e against the state including the earlier events of the Tx
// and, if it is valid, applies it. The error is a *tether.Error with code
// bad_request or conflict; on error nothing of e is applied, and the earlier
// events of the Tx stay applied. Apply panics if the Tx was committed or if
// its machine changed since Begin.
func (tx *Tx) Apply(e *tether.Event) error {
	if !tx.direct {
		tx.check()
	}
	if err := tx.m.checkShape(e); err != nil {
		return err
	}
	if !tx.direct {
		if err := checkKept(e); err != nil {
			return err
		}
	}
	if e.Type == tether.EventRunCreated {
		return tx.runCreated(e)
	}
	r := tx.run(e.RunID)
	if r == nil {
		return badRequest("run %s not found", q(e.RunID))
	}
	if r.run.Status.Terminal() {
		return errRunFinished(e.RunID)
	}
	var err error
	switch e.Type {
	case tether.EventMessageCreated:
		err = tx.messageCreated(e)
	case tether.EventRunStarted:
		err = tx.runStarted(e, r)
	case tether.EventMessageStarted:
		err = tx.messageStarted(e, r)
	case tether.EventTextDelta, tether.EventReasoningDelta:
		var ms *msgState
		if ms, err = tx.runningMessage(e); err == nil {
			tx.ownMsg(e.MessageID, ms).updated = e.TS
		}
	case tether.EventToolStarted:
		err = tx.toolStarted(e)
	case tether.EventToolDelta, tether.EventToolFinished:
		err = tx.toolEvent(e)
	case tether.EventMessageUpdated:
		var ms *msgState
		if ms, err = tx.message(e); err == nil {
			tx.ownMsg(e.MessageID, ms).updated = e.TS
		}
	case tether.EventMessageFinished:
		err = tx.messageFinished(e)
	case tether.EventRunWaiting:
		err = tx.runWaiting(e, r)
	case tether.EventRunInput:
		err = tx.runInput(e, r)
	case tether.EventStateSnapshot, tether.EventStateDelta:
		err = tx.stateEvent(e, r)
	case tether.EventRunCancelRequested:
		if r.run.CancelRequestedAt.IsZero() {
			tx.ownRun(e.RunID, r).run.CancelRequestedAt = e.TS
		}
	case tether.EventRunFinished:
		tx.runFinished(e, r)
	}
	if err != nil {
		return err
	}
	tx.ownRun(e.RunID, r).run.LastUpdateAt = e.TS
	if tx.direct {
		tx.m.version++
	}
	return nil
}

// Commit merges the Tx into its machine. Calling it again does nothing.
// It panics if the machine changed since Begin (another Tx was committed).
func (tx *Tx) Commit() {
	if tx.done || tx.direct {
		return
	}
	tx.check()
	m := tx.m
	for id, r := range tx.runs {
		m.runs[id] = r
	}
	m.order = append(m.order, tx.created...)
	for id, s := range tx.msgs {
		m.msgs[id] = s
	}
	for ref, st := range tx.statuses {
		m.msgs[ref.msg].setToolStatus(ref.i, st)
	}
	m.th = tx.own
	switch {
	case tx.work.live: // the state's tree goes to the machine, unwritten
		m.state, m.work = nil, tx.work
	case tx.stateSet:
		m.state, m.work = tx.state, stateWork{}
	}
	m.version++
	tx.done = true
}

func (tx *Tx) check() {
	if tx.done {
		panic("runs: Tx used after Commit")
	}
	if tx.version != tx.m.version {
		panic("runs: Tx used after its Machine changed")
	}
}

// Changed returns the runs the Tx created or changed, with their current
// values, in the order the Tx first touched them.
func (tx *Tx) Changed() []tether.Run {
	out := make([]tether.Run, len(tx.touched))
	for i, id := range tx.touched {
		out[i] = copyRun(&tx.runs[id].run)
	}
	return out
}

// Run returns a copy of a run as the Tx sees it.
func (tx *Tx) Run(id string) (tether.Run, bool) {
	r := tx.run(id)
	if r == nil {
		return tether.Run{}, false
	}
	return copyRun(&r.run), true
}

// PeekRun returns a run as the Tx sees it without copying it, for a
// caller that only reads a few fields on a hot path (Run clones the run's
// input messages). The run is shared: never modify it, and do not keep it
// past the next change the Tx makes.
func (tx *Tx) PeekRun(id string) (*tether.Run, bool) {
	r := tx.run(id)
	if r == nil {
		return nil, false
	}
	return &r.run, true
}

// Message returns what the Tx knows of a message.
func (tx *Tx) Message(id string) (MessageInfo, bool) {
	s := tx.msg(id)
	if s == nil {
		return MessageInfo{}, false
	}
	return s.info(id), true
}

// State returns the thread's state as it will be after Commit, nil while
// it is null. It is shared: never modify it.
func (tx *Tx) State() json.RawMessage {
	if tx.direct {
		return tx.m.State()
	}
	if tx.work.live {
		tx.state = tx.work.flush()
	}
	if tx.stateSet {
		return tx.state
	}
	return tx.m.State()
}

// ThreadStatus returns the thread status as it will be after Commit.
func (tx *Tx) ThreadStatus() tether.ThreadStatus { return tx.th.status() }

// ActiveRunID returns the thread's active run id as it will be after Commit.
func (tx *Tx) ActiveRunID() string { return tx.th.activeRunID() }

// NextPending returns the oldest pending run, if there is one and no run is
// active, as the Tx sees it.
func (tx *Tx) NextPending() (tether.Run, bool) {
	if tx.th.active != "" || len(tx.th.pending) == 0 {
		return tether.Run{}, false
	}
	return tx.Run(tx.th.pending[0])
}

// Unfinished returns the runs that are not terminal as the Tx sees them:
// the active run first, then the pending ones in creation order.
func (tx *Tx) Unfinished() []tether.Run {
	var out []tether.Run
	if tx.th.active != "" {
		r, _ := tx.Run(tx.th.active)
		out = append(out, r)
	}
	for _, id := range tx.th.pending {
		r, _ := tx.Run(id)
		out = append(out, r)
	}
	return out
}

// message returns the message e names, which must belong to e's run.
func (tx *Tx) message(e *tether.Event) (*msgState, error) {
	s := tx.msg(e.MessageID)
	if s == nil {
		return nil, badRequest("message %s not found", q(e.MessageID))
	}
	if s.runID != e.RunID {
		return nil, badRequest("message %s belongs to run %s, not %s", e.MessageID, s.runID, e.RunID)
	}
	return s, nil
}

func (tx *Tx) runningMessage(e *tether.Event) (*msgState, error) {
	s, err := tx.message(e)
	if err != nil {
		return nil, err
	}
	if s.status.Terminal() {
		return nil, conflict("message %s is finished", e.MessageID)
	}
	return s, nil
}

func (tx *Tx) runCreated(e *tether.Event) error {
	id := e.Run.ID
	if tx.run(id) != nil {
		return conflict("run %s already exists", id)
	}
	r := &runState{run: *e.Run}
	if r.run.CreatedAt.IsZero() {
		r.run.CreatedAt = e.TS
	}
	if r.run.LastUpdateAt.IsZero() {
		r.run.LastUpdateAt = e.TS
	}
	tx.putRun(id, r)
	if tx.direct {
		tx.m.order = append(tx.m.order, id)
		tx.m.version++
	} else {
		tx.created = append(tx.created, id)
	}
	tx.th.pending = append(tx.th.pending, id) // appendOwned
	return nil
}

func (tx *Tx) messageCreated(e *tether.Event) error {
	msg := e.Message
	if tx.msg(msg.ID) != nil {
		return conflict("message %s already exists", msg.ID)
	}
	s := &msgState{runID: e.RunID, role: msg.Role, status: msg.Status, started: e.TS, updated: e.TS}
	if r := tx.run(e.RunID); r != nil && r.run.Status == tether.RunPending {
		s.input = true
	}
	if s.status == "" {
		s.status = tether.MessageDone
	}
	for i := range msg.Parts {
		if p := &msg.Parts[i]; p.Type == tether.PartTool {
			s.tools = append(s.tools, toolState{p.CallID, createdToolStatus(p)})
		}
	}
	tx.putMsg(msg.ID, s)
	return nil
}

func (tx *Tx) runStarted(e *tether.Event, r *runState) error {
	attempt := e.Attempt
	switch r.run.Status {
	case tether.RunPending:
		if a := tx.th.active; a != "" {
			return conflict("run %s cannot start while run %s is active", e.RunID, a)
		}
		if attempt == 0 {
			attempt = 1
		}
	default: // running or waiting: only a reclaim by a newer attempt
		if attempt <= r.run.Attempt {
			return conflict("run %s is already started (attempt %d)", e.RunID, r.run.Attempt)
		}
	}
	r = tx.ownRun(e.RunID, r)
	if r.run.Status == tether.RunPending {
		tx.th.pending = without(tx.th.pending, e.RunID)
	}
	if r.run.StartedAt.IsZero() {
		r.run.StartedAt = e.TS
	}
	r.run.Attempt = attempt
	r.run.WorkerID = e.WorkerID
	// A reclaimed run keeps its status: a waiting run still waits on its
	// request, so a person's answer is never lost to a worker restart;
	// the new worker follows the run and gets the answer when it comes.
	if r.run.Status == tether.RunPending {
		r.run.Status = tether.RunRunning
	}
	tx.th.active, tx.th.waiting = e.RunID, r.run.Status == tether.RunWaiting
	return nil
}

func (tx *Tx) messageStarted(e *tether.Event, r *runState) error {
	if !r.run.Status.Active() {
		return conflict("run %s has not started", e.RunID)
	}
	if tx.msg(e.MessageID) != nil {
		return conflict("message %s already exists", e.MessageID)
	}
	tx.putMsg(e.MessageID, &msgState{
		runID: e.RunID, role: e.Role, status: tether.MessageRunning, started: e.TS, updated: e.TS,
	})
	r = tx.ownRun(e.RunID, r)
	r.running = append(r.running, e.MessageID) // appendOwned
	return nil
}

func (tx *Tx) toolStarted(e *tether.Event) error {
	s, err := tx.runningMessage(e)
	if err != nil {
		return err
	}
	if s.tool(e.CallID) >= 0 {
		return conflict("tool call %s already exists in message %s", e.CallID, e.MessageID)
	}
	s = tx.ownMsg(e.MessageID, s)
	s.tools = append(s.tools, toolState{e.CallID, tether.ToolRunning}) // appendOwned
	s.updated = e.TS
	return nil
}

// toolEvent applies tool.delta and tool.finished.
func (tx *Tx) toolEvent(e *tether.Event) error {
	s, err := tx.runningMessage(e)
	if err != nil {
		return err
	}
	i := s.tool(e.CallID)
	if i < 0 {
		return badRequest("tool call %s not found in message %s", q(e.CallID), e.MessageID)
	}
	if tx.toolStatus(e.MessageID, s, i) != tether.ToolRunning {
		return conflict("tool call %s is finished", e.CallID)
	}
	s = tx.ownMsg(e.MessageID, s)
	s.updated = e.TS
	if e.Type == tether.EventToolFinished {
		st := tether.ToolDone
		if !isNull(e.Error) {
			st = tether.ToolError
		}
		tx.setToolStatus(e.MessageID, s, i, st)
	}
	return nil
}

func (tx *Tx) messageFinished(e *tether.Event) error {
	s, err := tx.runningMessage(e)
	if err != nil {
		return err
	}
	tx.finishMessage(e.MessageID, s, tether.MessageStatus(e.Status), e.TS)
	r := tx.ownRun(e.RunID, tx.run(e.RunID))
	r.running = without(r.running, e.MessageID)
	return nil
}

// finishMessage ends a message and the tool calls still running in it.
func (tx *Tx) finishMessage(id string, s *msgState, st tether.MessageStatus, ts tether.Time) {
	s = tx.ownMsg(id, s)
	s.status, s.updated = st, ts
	tool := tether.ToolError
	if st == tether.MessageDone {
		tool = tether.ToolDone
	}
	for i := range s.tools {
		if tx.toolStatus(id, s, i) == tether.ToolRunning {
			tx.setToolStatus(id, s, i, tool)
		}
	}
}

func (tx *Tx) runWaiting(e *tether.Event, r *runState) error {
	switch r.run.Status {
	case tether.RunPending:
		return conflict("run %s has not started", e.RunID)
	case tether.RunWaiting:
		return conflict("run %s is already waiting on request %s", e.RunID, r.run.Request.ID)
	}
	r = tx.ownRun(e.RunID, r)
	rq := *e.Request
	r.run.Status, r.run.Request = tether.RunWaiting, &rq
	tx.th.waiting = true
	return nil
}

func (tx *Tx) runInput(e *tether.Event, r *runState) error {
	if r.run.Status != tether.RunWaiting {
		return conflict("run %s is not waiting", e.RunID)
	}
	if e.RequestID != r.run.Request.ID {
		return conflict("run %s is waiting on request %s, not %s", e.RunID, r.run.Request.ID, q(e.RequestID))
	}
	r = tx.ownRun(e.RunID, r)
	r.run.Status, r.run.Request = tether.RunRunning, nil
	r.answers = withAnswer(r.answers, e.RequestID, e.Value)
	tx.th.waiting = false
	return nil
}

// stateEvent applies state.snapshot and state.delta: the state is the
// thread's, but only a run that is running or waiting may change it, and
// a pending run: the state a front end gives the run it creates, which
// only the server writes (a worker appends to a run it claimed), whole
// or, when the whole is larger than an event, as a patch.
func (tx *Tx) stateEvent(e *tether.Event, r *runState) error {
	if !r.run.Status.Active() && r.run.Status != tether.RunPending {
		return conflict("run %s has not started", e.RunID)
	}
	var next json.RawMessage
	if e.Type == tether.EventStateSnapshot {
		if !isNull(e.State) {
			// Kept compact, which state.delta relies on (applyCompact).
			var c bytes.Buffer
			if err := json.Compact(&c, e.State); err != nil { // unreachable: checkShape checked it
				return badRequest("field %q of %s is not valid JSON", "state", e.Type)
			}
			next = c.Bytes()
			if !tx.direct && !stateWithin(next) {
				return tooLarge("the state of %s is larger than 8 MiB or nested more than %d levels deep", e.Type, maxStateDepth)
			}
		}
	} else {
		ops, err := parsePatch(e.Patch)
		if err != nil { // unreachable: checkShape parsed it
			return badRequest("field %q of %s is not a JSON Patch (RFC 6902): %v", "patch", e.Type, err)
		}
		w := &tx.work
		switch {
		case tx.direct:
			w = &tx.m.work
			if w.lent {
				w.rebuild()
			}
		case !w.live && !tx.stateSet && tx.m.work.live:
			*w = tx.m.work.lend()
		}
		var base json.RawMessage
		if !w.live {
			base = tx.State()
		}
		if err := w.apply(base, ops, len(e.Patch), !tx.direct); err != nil {
			if errors.Is(err, errStateDepth) || errors.Is(err, errStateSize) {
				return tooLarge("the patch of %s %v", e.Type, err)
			}
			return conflict("the patch of %s does not apply to the thread's state: %v", e.Type, err)
		}
		if !tx.direct {
			tx.stateSet = true // in tx.work until State or Commit
		}
		if w.due() {
			if tx.direct {
				tx.m.state = w.flush()
			} else {
				tx.state = w.flush()
			}
		}
		return nil
	}
	if tx.direct {
		tx.m.state, tx.m.work = next, stateWork{}
	} else {
		tx.state, tx.stateSet, tx.work = next, true, stateWork{}
	}
	return nil
}

// runFinished cannot fail: its shape was checked and any non-terminal run
// may finish.
func (tx *Tx) runFinished(e *tether.Event, r *runState) {
	st := tether.RunStatus(e.Status)
	info, _ := runError(e.Error)
	msgSt := tether.MessageAborted
	switch st {
	case tether.RunDone:
		msgSt = tether.MessageDone
	case tether.RunError:
		msgSt = tether.MessageError
	}
	for _, id := range r.running {
		tx.finishMessage(id, tx.msg(id), msgSt, e.TS)
	}
	wasPending := r.run.Status == tether.RunPending
	r = tx.ownRun(e.RunID, r)
	r.running = nil
	r.run.Status, r.run.CompletedAt, r.run.Error, r.run.Request = st, e.TS, info, nil
	if wasPending {
		tx.th.pending = without(tx.th.pending, e.RunID)
	}
	if tx.th.active == e.RunID {
		tx.th.active, tx.th.waiting = "", false
	}
	tx.th.last = st
}
