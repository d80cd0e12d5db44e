package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
	"github.com/tetherhq/tether/runs"
	"github.com/tetherhq/tether/store"
)

// RunRequest asks for a new run.
type RunRequest struct {
	Agent     string
	Input     tether.RunInput
	Metadata  json.RawMessage
	Multitask tether.Multitask // defaults to reject
	// IdempotencyKey, if set, makes the request safe to retry: a second
	// request with the same key on the same thread returns the first run.
	IdempotencyKey string
	// State, if set, becomes the thread's state with the run: a
	// state.snapshot of the run follows its run.created in the same
	// append (a state.delta of what it changes, when the whole state is
	// larger than an event), so the run starts with it and a refused
	// request changes nothing. A front end that edits the agent's state between runs
	// (AG-UI's RunAgentInput.state) sends it so. Only with multitask
	// reject: the state must not change under another run.
	State json.RawMessage
}

// RunCreated is the outcome of CreateRun.
type RunCreated struct {
	Run tether.Run
	// Created is false when an earlier request with the same idempotency
	// key created the run.
	Created bool
	// Before is the thread's last offset before the run's first event: a
	// subscription from it sees the whole run.
	Before tether.Offset
}

// CreateRun creates a run on a thread: its run.created event and one
// message.created event per input message, in one atomic append.
func (e *Engine) CreateRun(ctx context.Context, threadID string, req RunRequest) (*RunCreated, error) {
	if err := checkIdempotencyKey(req.IdempotencyKey); err != nil {
		return nil, err
	}
	// A repeated idempotency key answers with its run whatever the
	// request says, so what is wrong with the request is its answer only
	// once the key turned out to be new (createRun).
	invalid := e.checkRunRequest(ctx, &req)
	if invalid != nil && req.IdempotencyKey == "" {
		return nil, invalid
	}
	for {
		rc, inFlight, err := e.createRun(ctx, threadID, req, invalid)
		if inFlight == nil {
			return rc, err
		}
		// A retry of a creation whose commit is still in flight: answer
		// once that commit has its outcome (the run then exists, or the
		// retry creates it).
		select {
		case <-inFlight.settled:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// CheckRunRequest returns what CreateRun would refuse req for on a thread
// that does not exist yet (where its idempotency key is new, and its
// state null), if anything. A caller that creates the run's thread first
// (the AI SDK's chat, AG-UI) checks the request before, so that a refused
// request writes nothing.
func (e *Engine) CheckRunRequest(ctx context.Context, req RunRequest) error {
	if err := checkIdempotencyKey(req.IdempotencyKey); err != nil {
		return err
	}
	if err := e.checkRunRequest(ctx, &req); err != nil {
		return err
	}
	// The thread is new: its state, null, can only be given whole.
	return e.checkNewThreadState(req.State)
}

func checkIdempotencyKey(key string) error {
	if len(key) > 255 {
		return tether.Errorf(tether.CodeBadRequest, "Idempotency-Key is longer than 255 bytes")
	}
	return nil
}

// checkRunRequest returns what makes a run request invalid, if anything,
// and sets its default multitask.
func (e *Engine) checkRunRequest(ctx context.Context, req *RunRequest) error {
	if len(req.Agent) > maxAgentName {
		return checkAgentName(req.Agent)
	}
	if !e.KnownAgent(ctx, req.Agent) {
		// Say what to do: the usual cause is a run sent before its worker
		// first claimed. The name is repeated raw only when it is plain.
		name := "NAME"
		if plainAgentName.MatchString(req.Agent) {
			name = req.Agent
		}
		return tether.Errorf(tether.CodeBadRequest, "unknown agent %q: no in-process agent has this name and no worker has asked for it; start its worker first, or declare the name (PUT /v1/agents/%s, or tether serve --agents %s)", clip.ID(req.Agent), name, name)
	}
	switch req.Multitask {
	case "":
		req.Multitask = tether.MultitaskReject
	case tether.MultitaskReject, tether.MultitaskEnqueue, tether.MultitaskInterrupt:
	default:
		return tether.Errorf(tether.CodeBadRequest, "multitask must be reject, enqueue or interrupt")
	}
	if len(req.State) > 0 {
		if req.Multitask != tether.MultitaskReject {
			return tether.Errorf(tether.CodeBadRequest, "a run that sets the thread's state needs multitask reject")
		}
		if err := runs.CheckState(req.State); err != nil {
			return err
		}
	}
	if err := checkMetadataSize(compactObject(req.Metadata), "metadata"); err != nil {
		return err
	}
	for i, m := range req.Input.Messages {
		if err := checkMetadataSize(compactObject(m.Metadata), fmt.Sprintf("input message %d: metadata", i)); err != nil {
			return err
		}
		if !m.Role.Valid() {
			return tether.Errorf(tether.CodeBadRequest, "input message %d: role must be user, assistant, tool or system", i)
		}
		if m.ID != "" && !tether.ValidID(m.ID) {
			return tether.Errorf(tether.CodeBadRequest, "input message %d: id must be %s", i, tether.IDRule)
		}
	}
	return nil
}

// createRun is one try of CreateRun. If the idempotency key names a run
// whose creation is still being committed, it returns that plan instead.
// invalid, if set, is the answer to a request whose key is new.
func (e *Engine) createRun(ctx context.Context, threadID string, req RunRequest, invalid error) (*RunCreated, *pending, error) {
	t, err := e.thread(ctx, threadID)
	if err != nil {
		return nil, nil, err
	}
	if req.IdempotencyKey != "" {
		if rc, err := e.runByKey(ctx, t, req.IdempotencyKey); rc != nil || err != nil {
			return rc, nil, err
		}
	}
	var inFlight *pending
	o, err := e.update(ctx, t, func(p *planner) error {
		inFlight = nil
		if req.IdempotencyKey != "" {
			if id, ok := t.idem[req.IdempotencyKey]; ok {
				if pd := t.idemPending[req.IdempotencyKey]; pd != nil && !pd.isSettled() {
					inFlight = pd
					return nil
				}
				r, _ := p.run(id)
				p.result = &RunCreated{Run: r}
				return nil
			}
		}
		if invalid != nil {
			return invalid
		}
		if active := p.tx.ActiveRunID(); active != "" {
			switch req.Multitask {
			case tether.MultitaskReject:
				return tether.Errorf(tether.CodeRunActive, "thread %s has an active run %s", threadID, active)
			case tether.MultitaskInterrupt:
				if err := p.interrupt(); err != nil {
					return err
				}
			}
		}
		run := tether.Run{
			ID: tether.NewID("run_"), ThreadID: threadID, Agent: req.Agent, Input: req.Input,
			Status: tether.RunPending, Metadata: compactObject(req.Metadata),
			CreatedAt: p.now, LastUpdateAt: p.now,
		}
		if err := p.emit(&tether.Event{Type: tether.EventRunCreated, RunID: run.ID, Run: &run}); err != nil {
			return err
		}
		if len(req.State) > 0 {
			if err := p.frontState(run.ID, req.State); err != nil {
				return err
			}
		}
		for _, in := range req.Input.Messages {
			id := in.ID
			if id == "" {
				id = tether.NewID("msg_")
			}
			msg := &tether.Message{ID: id, ThreadID: threadID, RunID: run.ID, Role: in.Role, Status: tether.MessageDone,
				Parts: []tether.Part{{Type: tether.PartText, Text: in.Content}}, Metadata: in.Metadata,
				StartedAt: p.now, LastUpdateAt: p.now}
			if err := p.emit(&tether.Event{Type: tether.EventMessageCreated, RunID: run.ID, MessageID: id, Message: msg}); err != nil {
				return err
			}
		}
		p.extras = map[string]*runExtra{run.ID: {key: req.IdempotencyKey, multitask: req.Multitask}}
		if req.IdempotencyKey != "" {
			p.idem = map[string]string{req.IdempotencyKey: run.ID}
		}
		p.result = &RunCreated{Run: run, Created: true}
		return nil
	})
	if err != nil || inFlight != nil {
		return nil, inFlight, err
	}
	rc := o.result.(*RunCreated)
	if rc.Created {
		// The run as created (pending), as its run.created event has it:
		// re-reading it could already show a worker's claim.
		rc.Before = o.before
	}
	return rc, nil, nil
}

// interrupt asks every unfinished run of the thread to stop: pending runs
// end cancelled at once, the active one gets a cancel request.
func (p *planner) interrupt() error {
	for _, r := range p.tx.Unfinished() {
		switch {
		case r.Status == tether.RunPending:
			if err := p.emit(&tether.Event{Type: tether.EventRunFinished, RunID: r.ID, Status: string(tether.RunCancelled)}); err != nil {
				return err
			}
		case r.Status.Active() && r.CancelRequestedAt.IsZero():
			if err := p.emit(&tether.Event{Type: tether.EventRunCancelRequested, RunID: r.ID}); err != nil {
				return err
			}
		}
	}
	return nil
}

// runByKey finds a run created earlier with an idempotency key.
func (e *Engine) runByKey(ctx context.Context, t *thread, key string) (*RunCreated, error) {
	t.wmu.Lock()
	id, ok := t.idem[key]
	t.wmu.Unlock()
	if !ok {
		rr, err := e.st.RunByKey(ctx, t.id, key)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, e.storeErr(err, "run")
		}
		id = rr.Run.ID
	}
	if r, ok := e.committedRun(t, id); ok {
		return &RunCreated{Run: r}, nil
	}
	return nil, nil // still in flight: the plan finds it in t.idem
}

// RunByKey returns the run of a thread that a request with idempotency
// key key created (CreateRun), without creating one: a caller that
// recognises a request sent again under another key than its first try's
// (the AI SDK's regenerate) asks whether that key made a run. It returns
// not_found if no committed run of the thread has the key.
func (e *Engine) RunByKey(ctx context.Context, threadID, key string) (tether.Run, error) {
	t, err := e.thread(ctx, threadID)
	if err != nil {
		return tether.Run{}, err
	}
	rc, err := e.runByKey(ctx, t, key)
	if err != nil {
		return tether.Run{}, err
	}
	if rc == nil {
		return tether.Run{}, tether.Errorf(tether.CodeNotFound, "thread %s has no run of this idempotency key", clip.ID(threadID))
	}
	return rc.Run, nil
}

func (e *Engine) committedRun(t *thread, id string) (tether.Run, bool) {
	t.rmu.Lock()
	defer t.rmu.Unlock()
	return t.state.Machine().Run(id)
}

// Run returns a run and its messages.
func (e *Engine) Run(ctx context.Context, runID string) (*tether.Snapshot, error) {
	t, err := e.threadOfRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	snap, ok := t.snapshotState().RunSnapshot(runID)
	if !ok {
		return nil, tether.Errorf(tether.CodeNotFound, "run %s not found", clip.ID(runID))
	}
	return snap, nil
}

// CancelRun asks a run to stop. A pending run ends cancelled at once; a
// running or waiting one gets run.cancel_requested and ends cancelled when
// its worker confirms or the cancel grace runs out. Cancelling a finished
// run changes nothing.
func (e *Engine) CancelRun(ctx context.Context, runID string) (tether.Run, error) {
	t, err := e.threadOfRun(ctx, runID)
	if err != nil {
		return tether.Run{}, err
	}
	_, err = e.update(ctx, t, func(p *planner) error {
		r, ok := p.run(runID)
		switch {
		case !ok:
			return tether.Errorf(tether.CodeNotFound, "run %s not found", clip.ID(runID))
		case r.Status == tether.RunPending:
			return p.emit(&tether.Event{Type: tether.EventRunFinished, RunID: runID, Status: string(tether.RunCancelled)})
		case r.Status.Active() && r.CancelRequestedAt.IsZero():
			return p.emit(&tether.Event{Type: tether.EventRunCancelRequested, RunID: runID})
		}
		return nil
	})
	if err != nil {
		return tether.Run{}, err
	}
	r, _ := e.committedRun(t, runID)
	return r, nil
}

// SubmitInput answers the open request of a waiting run: it appends
// run.input and the run goes on. The same answer to a request the run
// already took (a client's repeat of a request whose outcome it could not
// learn) changes nothing and returns the run as it is; another answer to
// it, or an answer to a request the run does not wait on, is a conflict.
func (e *Engine) SubmitInput(ctx context.Context, runID, requestID string, value json.RawMessage) (tether.Run, error) {
	if len(value) == 0 {
		value = json.RawMessage("null")
	}
	for {
		t, err := e.threadOfRun(ctx, runID)
		if err != nil {
			return tether.Run{}, err
		}
		repeat := false
		_, err = e.update(ctx, t, func(p *planner) error {
			repeat = false
			r, ok := p.run(runID)
			if !ok {
				return tether.Errorf(tether.CodeNotFound, "run %s not found", clip.ID(runID))
			}
			if r.Status == tether.RunWaiting && r.Request != nil && r.Request.ID == requestID {
				return p.answer(runID, requestID, value)
			}
			switch answered, same := p.tx.Answered(runID, requestID, value); {
			case same:
				repeat = true
				return nil
			case answered:
				return tether.Errorf(tether.CodeConflict, "request %q of run %s was answered with another value", clip.ID(requestID), runID)
			}
			return tether.Errorf(tether.CodeConflict, "run %s is not waiting on request %q", runID, clip.ID(requestID))
		})
		if err != nil {
			return tether.Run{}, err
		}
		if !repeat || e.committedAnswer(t, runID, requestID, value) {
			r, _ := e.committedRun(t, runID)
			return r, nil
		}
		// The answer found is still being committed (its first try timed
		// out): answer once it is, or, if its commit failed, take this
		// one. A repeat is never answered for an answer not in the log.
		idle := make(chan struct{})
		go func() {
			t.waitIdle() // ends with the thread's flush
			close(idle)
		}()
		select {
		case <-idle:
		case <-ctx.Done():
			return tether.Run{}, ctx.Err()
		}
	}
}

// answer emits run.input: the answer value to request requestID of run
// runID. An answer over the largest event is refused as the client knows
// it: its answer, not "event 0 (run.input)".
func (p *planner) answer(runID, requestID string, value json.RawMessage) error {
	ev := &tether.Event{Type: tether.EventRunInput, RunID: runID, RequestID: requestID, Value: value}
	b, err := p.encode(ev)
	var size *eventSizeError
	if errors.As(err, &size) {
		return tether.Errorf(tether.CodeTooLarge, "the answer to request %q is too large: %d bytes of JSON, %d bytes as the run's run.input event, over the largest event this server takes (%d bytes); send a smaller answer",
			clip.ID(requestID), len(value), size.size, size.limit)
	}
	if err != nil {
		b = nil // prepare says what is wrong with it, as for any event
	}
	return p.emitEncoded(ev, b)
}

// committedAnswer reports whether the run took value for requestID in a
// committed event.
func (e *Engine) committedAnswer(t *thread, runID, requestID string, value json.RawMessage) bool {
	t.rmu.Lock()
	defer t.rmu.Unlock()
	_, same := t.state.Machine().Answered(runID, requestID, value)
	return same
}
