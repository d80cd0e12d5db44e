package runs

import (
	"strings"

	tether "github.com/tetherhq/tether"
)

// Snapshot returns the whole thread as of Offset(): the thread, its runs and
// its messages, both in creation order. The snapshot shares the State's JSON
// fields (metadata, tool inputs and outputs), which must not be modified.
func (s *State) Snapshot() *tether.Snapshot {
	snap := s.snapshot(s.m.Runs())
	snap.Messages = make([]tether.Message, len(s.msgs))
	for i, c := range s.msgs {
		snap.Messages[i] = s.message(c)
	}
	return snap
}

// RunSnapshot returns the thread with only one run and that run's messages.
// It reports false if the run does not exist.
func (s *State) RunSnapshot(runID string) (*tether.Snapshot, bool) {
	r, ok := s.m.Run(runID)
	if !ok {
		return nil, false
	}
	snap := s.snapshot([]tether.Run{r})
	ix := s.byRun[runID]
	snap.Messages = make([]tether.Message, len(ix))
	for i, j := range ix {
		snap.Messages[i] = s.message(s.msgs[j])
	}
	return snap, true
}

// MessageSnapshot returns the thread with only one message and its run. It
// reports false if the message does not exist.
func (s *State) MessageSnapshot(messageID string) (*tether.Snapshot, bool) {
	i, ok := s.index[messageID]
	if !ok {
		return nil, false
	}
	c := s.msgs[i]
	r, _ := s.m.Run(s.m.msgs[c.id].runID)
	snap := s.snapshot([]tether.Run{r})
	snap.Messages = []tether.Message{s.message(c)}
	return snap, true
}

func (s *State) snapshot(runs []tether.Run) *tether.Snapshot {
	return &tether.Snapshot{Thread: s.Thread(), Runs: runs, Offset: s.offset, State: s.m.State()}
}

// Thread returns the thread's row as of Offset(): as created, with its status
// and active run derived from the runs and UpdatedAt the time of the last
// event.
func (s *State) Thread() tether.Thread {
	t := s.thread
	t.Status = s.m.ThreadStatus()
	t.ActiveRunID = s.m.ActiveRunID()
	t.UpdatedAt = s.updated
	if t.UpdatedAt.IsZero() {
		t.UpdatedAt = t.CreatedAt
	}
	t.LastOffset = s.offset
	return t
}

func (s *State) message(c *content) tether.Message {
	ms := s.m.msgs[c.id]
	msg := tether.Message{
		ID:           c.id,
		ThreadID:     s.thread.ID,
		RunID:        ms.runID,
		Role:         ms.role,
		Status:       ms.status,
		Parts:        make([]tether.Part, len(c.parts)),
		Metadata:     c.metadata(),
		StartedAt:    ms.started,
		LastUpdateAt: ms.updated,
	}
	for i := range c.parts {
		msg.Parts[i] = c.parts[i].export()
	}
	return msg
}

func (p *part) export() tether.Part {
	out := tether.Part{Type: p.typ}
	switch p.typ {
	case tether.PartText, tether.PartReasoning:
		out.Text = string(p.text)
	case tether.PartData:
		out.Name, out.Data = p.x.name, p.x.data
	case tether.PartTool:
		x := p.x
		out.CallID, out.Name, out.Input, out.InputText = x.callID, x.name, x.input, string(p.text)
		out.Output, out.Error, out.Status = x.output, x.err, x.status
	}
	return out
}

// FinalAnswer returns the answer of a run (the latest if runID is ""): the
// text parts of its last assistant message, reasoning left out, joined.
// Complete is true iff the run is terminal. A thread without runs has an
// empty answer. It reports false if runID names no run.
func (s *State) FinalAnswer(runID string) (*tether.FinalAnswer, bool) {
	if runID == "" {
		runID = s.m.LatestRunID()
		if runID == "" {
			return &tether.FinalAnswer{Offset: s.offset}, true
		}
	}
	r, ok := s.m.runs[runID]
	if !ok {
		return nil, false
	}
	fa := &tether.FinalAnswer{
		RunID:       runID,
		Complete:    r.run.Status.Terminal(),
		CompletedAt: r.run.CompletedAt,
		Status:      string(r.run.Status),
		Offset:      s.offset,
	}
	ix := s.byRun[runID]
	for i := len(ix) - 1; i >= 0; i-- {
		c := s.msgs[ix[i]]
		if s.m.msgs[c.id].role != tether.RoleAssistant {
			continue
		}
		fa.MessageID = c.id
		var b strings.Builder
		for j := range c.parts {
			if c.parts[j].typ == tether.PartText {
				b.Write(c.parts[j].text)
			}
		}
		fa.Content = b.String()
		break
	}
	return fa, true
}
