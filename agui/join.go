package agui

import (
	tether "github.com/tetherhq/tether"
)

// Load sets the projector's state to snap's, as if it had projected the
// log up to snap.Offset, without making frames: the events after
// snap.Offset continue from it. Use it to serve what follows a change the
// caller just made (an answer to a waiting run).
func (p *Projector) Load(snap *tether.Snapshot) {
	p.runs, p.msgs, p.order, p.seg, p.held = map[string]*runState{}, map[string]*msgState{}, nil, nil, nil
	for i := range snap.Runs {
		r := &snap.Runs[i]
		if r.Status.Terminal() || (p.opts.Run != "" && r.ID != p.opts.Run) {
			continue
		}
		p.runs[r.ID] = &runState{id: r.ID, aguiID: aguiRunID(r), status: r.Status, meta: r.Metadata, req: r.Request}
	}
	for _, m := range snap.Messages {
		r := p.runs[m.RunID]
		if r == nil {
			continue
		}
		if r.status == tether.RunPending {
			// Every message of a pending run is an input message.
			if ms, ok := aguiMessages(m); ok {
				r.input = append(r.input, ms...)
			}
			continue
		}
		if m.Status != tether.MessageRunning {
			if pending := pendingParts(m); len(pending) > 0 {
				p.msgs[m.ID] = &msgState{id: m.ID, run: m.RunID, role: m.Role, tools: pending}
				p.order = append(p.order, m.ID)
			}
			continue
		}
		ms := &msgState{id: m.ID, run: m.RunID, role: m.Role, nparts: len(m.Parts), toolFor: toolCallIDOf(m.Metadata)}
		if n := len(m.Parts); n > 0 {
			ms.last, ms.lastIdx = m.Parts[n-1].Type, n-1
		}
		for _, part := range m.Parts {
			switch {
			case part.Type != tether.PartTool:
				if m.Role == tether.RoleTool && part.Type == tether.PartText {
					ms.text = append(ms.text, part.Text...)
				}
			case part.Status == tether.ToolRunning:
				ms.tools = append(ms.tools, &toolState{id: part.CallID, name: part.Name, running: true, hasArgs: toolArgs(part) != ""})
			default:
				ms.tools = append(ms.tools, pendingParts(tether.Message{Parts: []tether.Part{part}})...)
			}
		}
		p.msgs[m.ID] = ms
		p.order = append(p.order, m.ID)
	}
	for _, r := range p.runs {
		if r.status == tether.RunRunning {
			p.seg = &segment{run: r.id, aguiID: r.aguiID}
		}
	}
}

// Join returns the join prelude of snap, and sets the projector's state as
// Load does: a client that has nothing gets from these frames what a
// client that read the stream up to snap.Offset has, and the events after
// snap.Offset continue both.
//
// The prelude shows the run a client joins: the thread's current run
// (running or waiting, else the latest; Options.Run if set). It is
// RUN_STARTED, MESSAGES_SNAPSHOT with every message of the thread (the
// running one as far as it got), STATE_SNAPSHOT with the thread's state
// unless it is null, then, by the run's status: running, a
// START for every construct open (text message, reasoning message, tool
// call), and the run goes on; waiting, RUN_FINISHED with the interrupt;
// ended, its RUN_FINISHED or RUN_ERROR. A run that has not started yet
// gets no prelude of its own (its RUN_STARTED comes when it starts, with
// its input): the thread shows its latest ended run instead, if it has
// one. A thread without a run that started has an empty prelude; its
// state, if a run's creation set it, follows the first RUN_STARTED.
func (p *Projector) Join(snap *tether.Snapshot) []Frame {
	p.Load(snap)
	p.out, p.off = nil, snap.Offset
	r := p.current(snap)
	if r == nil {
		// No run has started: a state set with a run's creation (a front
		// end's, engine.RunRequest.State) goes in the first one.
		if len(snap.State) > 0 && string(snap.State) != "null" {
			p.held = []Event{ev(StateSnapshot, "snapshot", snap.State)}
		}
		return nil
	}
	started := ev(RunStarted, "threadId", p.thread, "runId", aguiRunID(r))
	p.emit(r.ID, started)
	p.emit(r.ID, ev(MessagesSnapshot, "messages", Messages(snap.Messages)))
	if len(snap.State) > 0 && string(snap.State) != "null" {
		p.emit(r.ID, ev(StateSnapshot, "snapshot", snap.State))
	}
	switch {
	case r.Status == tether.RunRunning:
		p.reopen(r.ID)
	case r.Status == tether.RunWaiting:
		p.emit(r.ID, ev(RunFinished, "threadId", p.thread, "runId", aguiRunID(r),
			"outcome", map[string]any{"type": "interrupt", "interrupts": interrupts(r.Request)}))
	default:
		p.emit(r.ID, finishEvent(p.thread, aguiRunID(r), r.Status, r.Error, pendingOfRun(snap, r.ID)))
	}
	out := p.flush()
	for i := range out {
		out[i].Prelude = true
	}
	return out
}

// current is the run the prelude shows, or nil.
func (p *Projector) current(snap *tether.Snapshot) *tether.Run {
	find := func(id string) *tether.Run {
		for i := range snap.Runs {
			if snap.Runs[i].ID == id {
				return &snap.Runs[i]
			}
		}
		return nil
	}
	if p.opts.Run != "" {
		r := find(p.opts.Run)
		if r == nil || r.Status == tether.RunPending {
			return nil
		}
		return r
	}
	for i := range snap.Runs {
		if r := &snap.Runs[i]; r.Status.Active() {
			return r
		}
	}
	// The latest run that has started (one that is pending starts later,
	// with its own RUN_STARTED).
	var latest *tether.Run
	for i := range snap.Runs {
		if r := &snap.Runs[i]; r.Status.Terminal() && (latest == nil || !r.CreatedAt.Before(latest.CreatedAt.Time)) {
			latest = r
		}
	}
	return latest
}

// pendingOfRun is pendingToolCallIds of a run that ended: its tool calls
// that ended done with neither output nor error.
func pendingOfRun(snap *tether.Snapshot, run string) []string {
	var ids []string
	for _, m := range snap.Messages {
		if m.RunID == run {
			for _, t := range pendingParts(m) {
				ids = append(ids, t.id)
			}
		}
	}
	return ids
}

// CurrentRun is the run a client joining snap's thread wants: the running
// or waiting run, else the latest run ("" for a thread without runs).
func CurrentRun(snap *tether.Snapshot) string {
	var latest *tether.Run
	for i := range snap.Runs {
		r := &snap.Runs[i]
		if r.Status.Active() {
			return r.ID
		}
		if latest == nil || !r.CreatedAt.Before(latest.CreatedAt.Time) {
			latest = r
		}
	}
	if latest == nil {
		return ""
	}
	return latest.ID
}
