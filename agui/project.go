package agui

import (
	"encoding/json"

	tether "github.com/tetherhq/tether"
)

// Options configure a Projector. The zero value projects a whole thread.
type Options struct {
	// Run, if set, projects only this Tether run: events of other runs are
	// ignored, and the join prelude shows this run. Defaults to every run.
	Run string
}

// Projector maps one stream's Tether events to AG-UI frames. It is not
// safe for concurrent use; each stream has its own.
type Projector struct {
	thread string
	opts   Options

	runs map[string]*runState
	msgs map[string]*msgState
	// order is the creation order of the messages in msgs, so that
	// constructs open and close in a stable order.
	order []string
	seg   *segment // the AG-UI run open on the stream, if any
	// held are changes of the thread's state made while no AG-UI run was
	// open (a run that waits may change it): sent in the next one.
	held []Event

	out []Frame // frames of the event being projected
	off tether.Offset
}

// New returns a projector of thread threadID.
func New(threadID string, opts Options) *Projector {
	return &Projector{thread: threadID, opts: opts, runs: map[string]*runState{}, msgs: map[string]*msgState{}}
}

// Event projects one committed event (its Offset set) and returns the
// frames it makes, possibly none. Events of a run the projector does not
// know are projected as well as they can be; it never fails.
func (p *Projector) Event(e *tether.Event) []Frame {
	if p.opts.Run != "" && e.RunID != p.opts.Run {
		return nil
	}
	p.out, p.off = nil, e.Offset
	switch e.Type {
	case tether.EventRunCreated:
		p.runCreated(e)
	case tether.EventRunStarted:
		p.runStarted(e.RunID)
	case tether.EventRunInput:
		p.runInput(e)
	case tether.EventRunWaiting:
		p.runWaiting(e)
	case tether.EventRunCancelRequested:
		p.inSegment(e.RunID, ev(Custom, "name", "tether.run.cancel_requested", "value", map[string]any{"runId": e.RunID}))
	case tether.EventRunFinished:
		p.runFinished(e)
	case tether.EventMessageStarted:
		p.messageStarted(e)
	case tether.EventTextDelta:
		p.textDelta(e)
	case tether.EventReasoningDelta:
		p.reasoningDelta(e)
	case tether.EventToolStarted:
		p.toolStarted(e)
	case tether.EventToolDelta:
		p.toolDelta(e)
	case tether.EventToolFinished:
		p.toolFinished(e)
	case tether.EventMessageUpdated:
		p.inSegment(e.RunID, ev(Custom, "name", "tether.message.updated",
			"value", map[string]any{"messageId": e.MessageID, "metadata": raw(e.Metadata)}))
	case tether.EventMessageFinished:
		p.messageFinished(e)
	case tether.EventMessageCreated:
		p.messageCreated(e)
	case tether.EventCustom:
		p.custom(e)
	case tether.EventStateSnapshot:
		p.state(e.RunID, ev(StateSnapshot, "snapshot", nullable(e.State)))
	case tether.EventStateDelta:
		p.state(e.RunID, ev(StateDelta, "delta", nullable(e.Patch)))
	default:
		p.other(e)
	}
	return p.flush()
}

// emit queues a frame of the event being projected.
func (p *Projector) emit(run string, e Event) {
	p.out = append(p.out, Frame{Event: e, Offset: p.off, RunID: run})
}

// flush returns the queued frames, the last one marked.
func (p *Projector) flush() []Frame {
	out := p.out
	if n := len(out); n > 0 {
		out[n-1].Last = true
	}
	p.out = nil
	return out
}

// RunOpen reports whether an AG-UI run is open on the stream: its
// RUN_STARTED projected, or folded (a stream resumed from a cursor, or
// from the state Load or Join set), and its end not. A stream the server
// ends while one is open must end it (RUN_ERROR), whether or not that
// stream sent its RUN_STARTED.
func (p *Projector) RunOpen() bool { return p.seg != nil }

// open reports whether the AG-UI run open on the stream is run's.
func (p *Projector) open(run string) bool { return p.seg != nil && p.seg.run == run }

// inSegment emits e if run's AG-UI run is open; events of a run that
// waits, or of one not shown, have no AG-UI run to go in.
func (p *Projector) inSegment(run string, e Event) {
	if p.open(run) {
		p.emit(run, e)
	}
}

// nullable is a stored JSON value for a field AG-UI requires: null if
// absent.
func nullable(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return json.RawMessage("null")
	}
	return v
}
