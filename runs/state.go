package runs

import (
	"encoding/json"
	"maps"
	"slices"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
)

// State is the fold of a thread's committed events: a Machine plus the
// content of every message (parts and metadata). It is exported as a
// tether.Snapshot.
//
// A State is not safe for concurrent use; Clone it to hand a copy to
// another goroutine.
type State struct {
	m      *Machine
	direct Tx // writes straight to m: committed events need no overlay

	thread  tether.Thread // ID, Metadata, CreatedAt as created
	updated tether.Time
	offset  tether.Offset

	msgs  []*content       // creation order
	index map[string]int   // message id → index in msgs
	byRun map[string][]int // run id → indexes in msgs, in order

	// ends holds the offset of the event that finished each run ("r" +
	// id) and message ("m" + id), so that a subscription can tell at once
	// whether what it follows ended before its cursor.
	ends map[string]tether.Offset
}

// content is the part of a message the Machine does not hold.
type content struct {
	id    string
	parts []part
	meta  json.RawMessage // always a JSON object; stale while metaTree is set
	// metaTree holds the metadata while message.updated patches it, until
	// something reads it (metadata).
	metaTree *metaTree
	// calls indexes the tool parts (of the first indexed parts) by call
	// id once there are more than a few parts, as msgState.calls does.
	// It is the State's own: Clone leaves it out.
	calls   map[string]int
	indexed int
}

// part is a tether.Part in a form that appends cheaply: a message streamed
// as 20k deltas costs O(total bytes), not O(n²). Text parts, the most
// numerous, are kept small; what tool and data parts add is in x.
type part struct {
	typ  string
	text []byte // text and reasoning; a tool call's streamed input
	x    *extra
}

// extra holds the fields of tool and data parts. It is modified only while
// its part is a running tool call, so clones share the others.
type extra struct {
	callID string
	name   string
	input  json.RawMessage
	output json.RawMessage
	err    json.RawMessage
	status string
	data   json.RawMessage
}

func (p *part) running() bool { return p.x != nil && p.x.status == tether.ToolRunning }

var emptyObject = json.RawMessage(`{}`)

// NewState returns the state of a thread with no events. thread is the
// thread's row as created: its ID, Metadata and CreatedAt are kept; the rest
// is derived from the events.
func NewState(thread tether.Thread) *State {
	s := &State{
		m:      NewMachine(thread.ID),
		thread: tether.Thread{ID: thread.ID, Metadata: thread.Metadata, CreatedAt: thread.CreatedAt},
		offset: tether.OffsetStart,
		index:  make(map[string]int),
		byRun:  make(map[string][]int),
		ends:   make(map[string]tether.Offset),
	}
	s.bind()
	return s
}

func (s *State) bind() {
	s.direct = Tx{m: s.m, direct: true, th: &s.m.th}
}

// Apply folds a committed event. e.Offset must be set and come after
// Offset(). If the state machine rejects e, Apply returns its error (a
// *tether.Error, bad_request or conflict) and changes nothing.
//
// The State keeps references to e's JSON fields instead of copying them:
// committed events are immutable.
func (s *State) Apply(e *tether.Event) error {
	if !e.Offset.IsEvent() {
		return badRequest("event %s has no offset", clip.String(e.Type, 40))
	}
	if !e.Offset.After(s.offset) {
		return conflict("offset %s does not come after %s", clip.String(string(e.Offset), 40), s.offset)
	}
	var finishing []string
	if e.Type == tether.EventRunFinished {
		// The machine forgets which messages the run's end finishes;
		// running is replaced, not modified, so holding it is safe.
		if r := s.m.runs[e.RunID]; r != nil {
			finishing = r.running
		}
	}
	if err := s.direct.Apply(e); err != nil {
		return err
	}
	s.fold(e, finishing)
	switch e.Type {
	case tether.EventRunFinished:
		s.ends["r"+e.RunID] = e.Offset
		for _, id := range finishing {
			s.ends["m"+id] = e.Offset
		}
	case tether.EventMessageFinished:
		s.ends["m"+e.MessageID] = e.Offset
	case tether.EventMessageCreated:
		s.ends["m"+e.Message.ID] = e.Offset
	}
	s.offset = e.Offset
	if !e.TS.IsZero() {
		s.updated = e.TS
	}
	return nil
}

func (s *State) fold(e *tether.Event, finishing []string) {
	switch e.Type {
	case tether.EventMessageCreated:
		s.addCreated(e)
	case tether.EventMessageStarted:
		meta := e.Metadata
		if isNull(meta) {
			meta = emptyObject
		}
		s.add(&content{id: e.MessageID, meta: meta}, e.RunID)
	case tether.EventTextDelta:
		s.appendText(e, tether.PartText)
	case tether.EventReasoningDelta:
		s.appendText(e, tether.PartReasoning)
	case tether.EventToolStarted:
		c := s.content(e.MessageID)
		c.parts = append(c.parts, part{typ: tether.PartTool, x: &extra{callID: e.CallID, name: e.Name, status: tether.ToolRunning}})
	case tether.EventToolDelta:
		p := s.content(e.MessageID).tool(e.CallID)
		p.text = append(p.text, e.Delta...)
	case tether.EventToolFinished:
		s.finishTool(e)
	case tether.EventMessageUpdated:
		c := s.content(e.MessageID)
		if c.metaTree == nil {
			c.metaTree = newMetaTree(c.meta)
		}
		c.metaTree.merge(e.Metadata)
	case tether.EventMessageFinished:
		s.syncTools(e.MessageID)
	case tether.EventRunFinished:
		for _, id := range finishing {
			s.syncTools(id)
		}
	}
}

func (s *State) content(id string) *content { return s.msgs[s.index[id]] }

// metadata returns the message's metadata, writing out what
// message.updated patched since it was last read.
func (c *content) metadata() json.RawMessage {
	if c.metaTree != nil {
		c.meta, c.metaTree = c.metaTree.encode(), nil
	}
	return c.meta
}

func (s *State) add(c *content, runID string) {
	s.index[c.id] = len(s.msgs)
	s.byRun[runID] = append(s.byRun[runID], len(s.msgs))
	s.msgs = append(s.msgs, c)
}

func (s *State) addCreated(e *tether.Event) {
	msg := e.Message
	c := &content{id: msg.ID, meta: msg.Metadata, parts: make([]part, len(msg.Parts))}
	if isNull(c.meta) {
		c.meta = emptyObject
	}
	for i := range msg.Parts {
		p := &msg.Parts[i]
		q := part{typ: p.Type}
		switch p.Type {
		case tether.PartText, tether.PartReasoning:
			q.text = []byte(p.Text)
		case tether.PartData:
			q.x = &extra{name: p.Name, data: p.Data}
		case tether.PartTool:
			q.x = &extra{callID: p.CallID, name: p.Name, input: p.Input, output: p.Output, status: createdToolStatus(p)}
			if !isNull(p.Error) {
				q.x.err = p.Error
			}
		}
		c.parts[i] = q
	}
	s.add(c, e.RunID)
}

func (s *State) appendText(e *tether.Event, typ string) {
	if e.Delta == "" {
		return
	}
	c := s.content(e.MessageID)
	if n := len(c.parts); n > 0 && c.parts[n-1].typ == typ {
		c.parts[n-1].text = append(c.parts[n-1].text, e.Delta...)
		return
	}
	c.parts = append(c.parts, part{typ: typ, text: append([]byte(nil), e.Delta...)})
}

func (c *content) tool(callID string) *part {
	if len(c.parts) > fewTools {
		if c.calls == nil {
			c.calls, c.indexed = make(map[string]int), 0
		}
		for ; c.indexed < len(c.parts); c.indexed++ {
			if p := &c.parts[c.indexed]; p.typ == tether.PartTool {
				c.calls[p.x.callID] = c.indexed
			}
		}
		if i, ok := c.calls[callID]; ok {
			return &c.parts[i]
		}
		return nil // unreachable: the machine checked the call exists
	}
	for i := len(c.parts) - 1; i >= 0; i-- {
		if p := &c.parts[i]; p.typ == tether.PartTool && p.x.callID == callID {
			return p
		}
	}
	return nil // unreachable: the machine checked the call exists
}

func (s *State) finishTool(e *tether.Event) {
	p := s.content(e.MessageID).tool(e.CallID)
	x := p.x
	switch {
	case len(e.Input) > 0:
		x.input = e.Input
	default:
		x.input = streamedInput(p.text)
	}
	p.text = nil
	x.output, x.err, x.status = e.Output, nil, tether.ToolDone
	// A null error means no error; dropping it keeps "error" on the wire
	// only for calls that failed.
	if !isNull(e.Error) {
		x.err, x.status = e.Error, tether.ToolError
	}
}

// streamedInput is the input of a tool call that finished without one: its
// streamed text as JSON if it parses, else as a JSON string, so that a
// model's broken JSON is still shown.
func streamedInput(text []byte) json.RawMessage {
	switch {
	case len(text) == 0:
		return nil
	case json.Valid(text):
		return slices.Clone(text)
	}
	b, _ := json.Marshal(string(text))
	return b
}

// syncTools copies tool statuses from the machine after a message ended.
func (s *State) syncTools(id string) {
	ms := s.m.msgs[id]
	c := s.content(id)
	for i := range c.parts {
		p := &c.parts[i]
		if !p.running() {
			continue
		}
		if j := ms.tool(p.x.callID); j >= 0 {
			p.x.status = ms.tools[j].status
		}
	}
}

// Machine returns the committed machine. It is the State's own: Clone it to
// speculate, never Apply to it directly.
func (s *State) Machine() *Machine { return s.m }

// RunFinishedAt returns the offset of a run's run.finished, or "" if the
// run has not finished (or is unknown).
func (s *State) RunFinishedAt(runID string) tether.Offset { return s.ends["r"+runID] }

// MessageFinishedAt returns the offset of the event that finished a message
// (message.finished, its run's run.finished, or message.created for a
// complete message), or "" if it has not finished (or is unknown).
func (s *State) MessageFinishedAt(messageID string) tether.Offset { return s.ends["m"+messageID] }

// Offset returns the offset of the last folded event, or tether.OffsetStart.
func (s *State) Offset() tether.Offset { return s.offset }

// Clone returns an independent copy of s in O(runs + messages + parts). Text
// is shared, not copied: the copy's text slices are full (cap == len), so an
// append on either side writes to memory the other does not see.
func (s *State) Clone() *State {
	c := &State{
		m:       s.m.Clone(),
		thread:  s.thread,
		updated: s.updated,
		offset:  s.offset,
		msgs:    make([]*content, len(s.msgs)),
		index:   maps.Clone(s.index),
		byRun:   make(map[string][]int, len(s.byRun)),
		ends:    maps.Clone(s.ends),
	}
	c.bind()
	for id, ix := range s.byRun {
		c.byRun[id] = slices.Clip(ix)
	}
	n, running := 0, 0
	for _, m := range s.msgs {
		n += len(m.parts)
		for j := range m.parts {
			if m.parts[j].running() {
				running++
			}
		}
	}
	// A few allocations for all messages and parts, whatever their number.
	cs := make([]content, len(s.msgs))
	ps := make([]part, n)
	xs := make([]extra, running)
	for i, m := range s.msgs {
		m.metadata() // the tree is s's alone
		cs[i] = *m
		cs[i].calls, cs[i].indexed = nil, 0
		k := copy(ps, m.parts)
		parts := ps[:k:k]
		ps = ps[k:]
		for j := range parts {
			p := &parts[j]
			p.text = slices.Clip(p.text)
			if p.running() {
				xs[0] = *p.x
				p.x, xs = &xs[0], xs[1:]
			}
		}
		cs[i].parts = parts
		c.msgs[i] = &cs[i]
	}
	return c
}
