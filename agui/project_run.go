package agui

import (
	"encoding/json"
	"slices"

	tether "github.com/tetherhq/tether"
)

// runState is what the projection keeps of an unfinished run.
type runState struct {
	id     string
	aguiID string // the AG-UI runId: metadata.ag_ui.runId, else id
	status tether.RunStatus
	meta   json.RawMessage
	// input is the run's input, collected while it is pending, for its
	// RUN_STARTED.
	input []Event
	req   *tether.Request
}

// segment is the AG-UI run open on the stream: a Tether run from its start
// or from an answer to its request, until it ends or waits.
type segment struct {
	run    string
	aguiID string
	steps  []string // STEP_STARTED re-emitted and not finished
}

func (p *Projector) run(id string) *runState {
	r := p.runs[id]
	if r == nil {
		r = &runState{id: id, aguiID: id, status: tether.RunRunning}
		p.runs[id] = r
	}
	return r
}

func (p *Projector) runCreated(e *tether.Event) {
	r := p.run(e.RunID)
	r.status = tether.RunPending
	if e.Run != nil {
		r.meta = e.Run.Metadata
		r.aguiID = aguiRunID(e.Run)
	}
}

// startSegment opens run r's AG-UI run (RUN_STARTED, with the run's input
// the first time) and reopens every construct the Tether state has open.
func (p *Projector) startSegment(r *runState, withInput bool) {
	p.seg = &segment{run: r.id, aguiID: r.aguiID}
	started := ev(RunStarted, "threadId", p.thread, "runId", r.aguiID)
	if withInput {
		started["input"] = runInput(p.thread, r)
	}
	r.input = nil
	p.emit(r.id, started)
	for _, e := range p.held {
		p.emit(r.id, e)
	}
	p.held = nil
	p.reopen(r.id)
}

// state sends a change of the thread's state (STATE_SNAPSHOT, STATE_DELTA)
// in run's AG-UI run, or holds it for the next one if none is open.
func (p *Projector) state(run string, e Event) {
	switch {
	case p.open(run):
		p.emit(run, e)
	case p.seg == nil:
		p.held = append(p.held, e)
	}
}

// reopen emits the STARTs of what run's running messages have open.
func (p *Projector) reopen(run string) {
	for _, id := range p.order {
		m := p.msgs[id]
		if m.run != run {
			continue
		}
		for _, t := range m.tools {
			if t.running {
				p.emit(run, ev(ToolCallStart, "toolCallId", t.id, "toolCallName", t.name, "parentMessageId", m.id))
			}
		}
		switch m.last {
		case tether.PartText:
			p.startText(m)
		case tether.PartReasoning:
			p.startReasoning(m)
		}
	}
}

// closeAll emits the ENDs of everything open in run's AG-UI run.
func (p *Projector) closeAll(run string) {
	for _, id := range p.order {
		if m := p.msgs[id]; m.run == run {
			p.closePart(m)
			for _, t := range m.tools {
				if t.running {
					p.emit(run, ev(ToolCallEnd, "toolCallId", t.id))
				}
			}
		}
	}
	if p.seg != nil {
		for i := len(p.seg.steps) - 1; i >= 0; i-- {
			p.emit(run, ev(StepFinished, "stepName", p.seg.steps[i]))
		}
		p.seg.steps = nil
	}
}

func (p *Projector) runStarted(id string) {
	r := p.run(id)
	switch r.status {
	case tether.RunPending:
		r.status = tether.RunRunning
	case tether.RunRunning:
		// a reclaim of a running run (a resumed worker): nothing changes
	default:
		return // a reclaim of a waiting run keeps it waiting
	}
	if p.seg == nil {
		p.startSegment(r, true)
	}
}

func (p *Projector) runInput(e *tether.Event) {
	r := p.run(e.RunID)
	r.status, r.req = tether.RunRunning, nil
	if p.seg == nil {
		p.startSegment(r, false)
	}
}

func (p *Projector) runWaiting(e *tether.Event) {
	r := p.run(e.RunID)
	r.status, r.req = tether.RunWaiting, e.Request
	if p.open(r.id) {
		p.closeAll(r.id)
		p.emit(r.id, ev(RunFinished, "threadId", p.thread, "runId", p.seg.aguiID,
			"outcome", map[string]any{"type": "interrupt", "interrupts": interrupts(e.Request)}))
		p.seg = nil
	}
}

func (p *Projector) runFinished(e *tether.Event) {
	r := p.run(e.RunID)
	r.status = tether.RunStatus(e.Status)
	switch {
	case p.open(r.id):
		p.closeAll(r.id)
	case p.seg == nil:
		// It ended without an AG-UI run open (cancelled while pending or
		// waiting, aborted while waiting): show its start and its end.
		p.startSegment(r, r.input != nil)
		p.closeAll(r.id)
	default:
		p.forget(r.id)
		return // another run is shown
	}
	var errInfo *tether.ErrorInfo
	if len(e.Error) > 0 {
		errInfo = new(tether.ErrorInfo)
		_ = json.Unmarshal(e.Error, errInfo)
	}
	p.emit(r.id, finishEvent(p.thread, p.seg.aguiID, r.status, errInfo, p.pendingCalls(r)))
	p.seg = nil
	p.forget(r.id)
}

// forget drops a finished run and its messages: nothing can change them.
func (p *Projector) forget(run string) {
	delete(p.runs, run)
	p.order = slices.DeleteFunc(p.order, func(id string) bool {
		if p.msgs[id].run == run {
			delete(p.msgs, id)
			return true
		}
		return false
	})
}

// pendingCalls returns the run's tool calls that ended without an output
// or error: calls left for the front end to answer (AG-UI's
// pendingToolCallIds).
func (p *Projector) pendingCalls(r *runState) []string {
	var ids []string
	for _, id := range p.order {
		if m := p.msgs[id]; m.run == r.id {
			for _, t := range m.tools {
				// A call still running when its run ends done ends done.
				if t.pending || (t.running && r.status == tether.RunDone) {
					ids = append(ids, t.id)
				}
			}
		}
	}
	return ids
}
