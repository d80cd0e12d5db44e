package runs

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
)

// The binary encoding of a State, for checkpoints: a State saved as of an
// offset and loaded again instead of folding the log up to it.
//
// Layout (version 3): the version byte, then the thread (id, metadata,
// created_at), the time of the last event, the offset, the status of the
// last run to finish, the thread's state (a byte string, nil for null);
// the runs in creation order, each followed by its answered requests
// (a count, then each request's id and the 32 bytes of its answer's
// digest; version 2 has none); the messages in creation
// order, each with what the machine knows of it and its content; the ends
// (offsets at which runs and messages finished), sorted by key. Strings
// and byte strings are a uvarint length and the bytes; a byte string that
// may be nil is its length plus one (0: nil); a time is 0 (zero) or 1 and
// its Unix milliseconds (varint); counts are uvarints.
//
// What the other fields of the State hold is derived from these on decode,
// so an encoding cannot make them disagree: the thread's pending and
// active runs, each run's running messages, each message's tool calls (in
// the machine) and the index of messages by run.

// stateVersion is the first byte of the encoding. A change of the layout,
// or of what a State holds, takes a new version: a decoder refuses
// versions it does not know (ErrStateVersion), and its caller folds the
// log instead.
const stateVersion = 3

// MarshalBinary encodes the State (see AppendBinary).
func (s *State) MarshalBinary() ([]byte, error) {
	return s.AppendBinary(make([]byte, 0, s.encodedSizeHint()))
}

// AppendBinary appends the State's encoding to b. DecodeState reads it
// back. It fails only if the State breaks its own invariants.
func (s *State) AppendBinary(b []byte) ([]byte, error) {
	return s.appendVersion(b, stateVersion)
}

// appendVersion appends the encoding of a version from 2 on (what an
// older version lacks is left out), for the tests of older checkpoints.
func (s *State) appendVersion(b []byte, version byte) ([]byte, error) {
	m := s.m
	if len(m.order) != len(m.runs) || len(m.msgs) != len(s.msgs) || m.threadID != s.thread.ID {
		return nil, fmt.Errorf("runs: encode state: %d runs in order of %d, %d messages of %d", len(m.order), len(m.runs), len(s.msgs), len(m.msgs))
	}
	b = append(b, version)
	b = appendString(b, s.thread.ID)
	b = appendBytes(b, s.thread.Metadata)
	b = appendTime(b, s.thread.CreatedAt)
	b = appendTime(b, s.updated)
	b = appendString(b, string(s.offset))
	b = appendString(b, string(m.th.last))
	b = appendBytes(b, m.State())

	b = binary.AppendUvarint(b, uint64(len(m.order)))
	for _, id := range m.order {
		r := m.runs[id]
		b = appendRun(b, &r.run)
		if version < 3 {
			continue
		}
		b = binary.AppendUvarint(b, uint64(len(r.answers)))
		for _, a := range r.answers {
			b = appendString(b, a.requestID)
			b = append(b, a.sum[:]...)
		}
	}

	b = binary.AppendUvarint(b, uint64(len(s.msgs)))
	for _, c := range s.msgs {
		ms := m.msgs[c.id]
		if ms == nil {
			return nil, fmt.Errorf("runs: encode state: message %s has content but no state", c.id)
		}
		b = appendString(b, c.id)
		b = appendString(b, ms.runID)
		b = appendString(b, string(ms.role))
		b = appendFlag(b, ms.input)
		b = appendString(b, string(ms.status))
		b = appendTime(b, ms.started)
		b = appendTime(b, ms.updated)
		b = appendBytes(b, c.metadata())
		b = binary.AppendUvarint(b, uint64(len(c.parts)))
		for i := range c.parts {
			p := &c.parts[i]
			b = appendString(b, p.typ)
			b = appendString(b, string(p.text))
			if p.x == nil {
				b = append(b, 0)
				continue
			}
			x := p.x
			b = append(b, 1)
			b = appendString(b, x.callID)
			b = appendString(b, x.name)
			b = appendBytes(b, x.input)
			b = appendBytes(b, x.output)
			b = appendBytes(b, x.err)
			b = appendString(b, x.status)
			b = appendBytes(b, x.data)
		}
	}

	keys := make([]string, 0, len(s.ends))
	for k := range s.ends {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendString(b, k)
		b = appendString(b, string(s.ends[k]))
	}
	return b, nil
}

// encodedSizeHint is a guess of the encoding's size, to allocate once.
func (s *State) encodedSizeHint() int {
	n := 256 + len(s.m.State()) + 256*len(s.m.order) + 96*len(s.ends)
	for _, c := range s.msgs {
		n += 96 + len(c.metadata())
		for i := range c.parts {
			n += 8 + len(c.parts[i].text)
			if x := c.parts[i].x; x != nil {
				n += 64 + len(x.input) + len(x.output) + len(x.err) + len(x.data)
			}
		}
	}
	return n
}

func appendRun(b []byte, r *tether.Run) []byte {
	b = appendString(b, r.ID)
	b = appendString(b, r.ThreadID)
	b = appendString(b, r.Agent)
	b = binary.AppendUvarint(b, uint64(len(r.Input.Messages)))
	for _, in := range r.Input.Messages {
		b = appendString(b, in.ID)
		b = appendString(b, string(in.Role))
		b = appendString(b, in.Content)
		b = appendBytes(b, in.Metadata)
	}
	b = appendString(b, string(r.Status))
	if r.Error == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = appendString(b, r.Error.Code)
		b = appendString(b, r.Error.Message)
	}
	b = appendBytes(b, r.Metadata)
	b = appendTime(b, r.CreatedAt)
	b = appendTime(b, r.StartedAt)
	b = appendTime(b, r.LastUpdateAt)
	b = appendTime(b, r.CompletedAt)
	b = binary.AppendVarint(b, int64(r.Attempt))
	b = appendString(b, r.WorkerID)
	b = appendTime(b, r.CancelRequestedAt)
	if r.Request == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = appendString(b, r.Request.ID)
	b = appendString(b, r.Request.Kind)
	return appendBytes(b, r.Request.Payload)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendBytes appends a byte string that may be nil.
func appendBytes(b, s []byte) []byte {
	if s == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(s))+1)
	return append(b, s...)
}

func appendTime(b []byte, t tether.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = append(b, 1)
	return binary.AppendVarint(b, t.UnixMilli())
}

// DecodeState decodes a State encoded by AppendBinary. It returns an error
// wrapping ErrStateVersion for an encoding of a version it does not know
// and ErrStateCorrupt for anything it cannot read, or that would make a
// State that breaks the invariants folding keeps (two active runs, a
// message of no run, a tool part without its call...).
//
// The State keeps references into data (text, JSON fields), as it does
// into the events it folds: data must not be modified afterwards.
func DecodeState(data []byte) (*State, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrStateCorrupt)
	}
	if data[0] > stateVersion || data[0] == 0 {
		return nil, fmt.Errorf("%w: version %d", ErrStateVersion, data[0])
	}
	d := &decoder{b: data[1:], version: data[0]}
	s := d.state()
	if d.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStateCorrupt, d.err)
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the state", ErrStateCorrupt, len(d.b))
	}
	return s, nil
}

// decoder reads an encoding; the first error sticks and every later read
// returns zero values, so that the decoding code reads straight through.
type decoder struct {
	b       []byte
	err     error
	version byte
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a count of items that take at least min bytes each: a count
// the rest of the input cannot hold is an error, so that a corrupt count
// never makes a large allocation.
func (d *decoder) count(min int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/min) {
		d.fail("count %d exceeds the input", n)
		return 0
	}
	return int(n)
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// appendFlag appends a bool as one byte, 0 or 1.
func appendFlag(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func (d *decoder) flag() bool {
	switch d.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail("bad flag")
	return false
}

// raw returns the next n bytes, sharing the input, with no room to grow:
// an append to them copies.
func (d *decoder) raw(n uint64) []byte {
	if n > uint64(len(d.b)) {
		d.fail("truncated")
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string { return string(d.raw(d.uvarint())) }

// text returns a byte string that is nil when empty.
func (d *decoder) text() []byte {
	v := d.raw(d.uvarint())
	if len(v) == 0 {
		return nil
	}
	return v
}

// bytes returns a byte string that may be nil.
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n == 0 {
		return nil
	}
	return d.raw(n - 1)
}

func (d *decoder) json() json.RawMessage {
	v := d.bytes()
	if v != nil && !json.Valid(v) {
		d.fail("invalid JSON")
		return nil
	}
	return v
}

func (d *decoder) timestamp() tether.Time {
	if !d.flag() {
		return tether.Time{}
	}
	ms, n := binary.Varint(d.b)
	if n <= 0 || ms == math.MinInt64 {
		d.fail("bad time")
		return tether.Time{}
	}
	d.b = d.b[n:]
	t := tether.At(time.UnixMilli(ms))
	if t.IsZero() {
		d.fail("bad time")
	}
	return t
}

func (d *decoder) offset() tether.Offset {
	o := tether.Offset(d.string())
	if o == tether.OffsetStart {
		return o
	}
	if _, _, err := tether.ParseOffset(o); err != nil {
		d.fail("bad offset %q", clip.String(string(o), 40))
	}
	return o
}

func (d *decoder) state() *State {
	th := tether.Thread{ID: d.string(), Metadata: d.json(), CreatedAt: d.timestamp()}
	s := NewState(th)
	s.updated = d.timestamp()
	s.offset = d.offset()
	m := s.m
	m.th.last = tether.RunStatus(d.string())
	if d.version >= 2 {
		m.state = d.json()
		if isNull(m.state) && m.state != nil {
			d.fail("a null state is encoded as nil")
			return nil
		}
	}

	for range d.count(8) {
		r := d.run()
		if d.err != nil {
			return nil
		}
		if r.ID == "" || m.runs[r.ID] != nil {
			d.fail("run %q: empty or repeated id", clip.String(r.ID, 40))
			return nil
		}
		rs := &runState{run: r}
		if d.version >= 3 {
			rs.answers = d.answers()
			if d.err != nil {
				return nil
			}
		}
		m.runs[r.ID] = rs
		m.order = append(m.order, r.ID)
		switch {
		case r.Status == tether.RunPending:
			m.th.pending = append(m.th.pending, r.ID)
		case r.Status.Active():
			if m.th.active != "" {
				d.fail("two active runs")
				return nil
			}
			m.th.active, m.th.waiting = r.ID, r.Status == tether.RunWaiting
		case !r.Status.Terminal():
			d.fail("run %s has status %q", r.ID, clip.String(string(r.Status), 40))
			return nil
		}
		if (r.Status == tether.RunWaiting) != (r.Request != nil) {
			d.fail("run %s is %s with request %v", r.ID, r.Status, r.Request != nil)
			return nil
		}
	}

	for range d.count(16) {
		c, ms := d.message()
		if d.err != nil {
			return nil
		}
		r := m.runs[ms.runID]
		switch {
		case c.id == "" || m.msgs[c.id] != nil:
			d.fail("message %q: empty or repeated id", clip.String(c.id, 40))
		case r == nil:
			d.fail("message %s: unknown run %q", c.id, clip.String(ms.runID, 40))
		case ms.status != tether.MessageRunning && !ms.status.Terminal():
			d.fail("message %s has status %q", c.id, clip.String(string(ms.status), 40))
		case ms.status == tether.MessageRunning && r.run.Status.Terminal():
			d.fail("message %s is running in finished run %s", c.id, r.run.ID)
		}
		if d.err != nil {
			return nil
		}
		m.msgs[c.id] = ms
		s.add(c, ms.runID)
		if ms.status == tether.MessageRunning {
			r.running = append(r.running, c.id)
		}
	}

	for range d.count(2) {
		k, off := d.string(), d.offset()
		if d.err != nil {
			return nil
		}
		s.ends[k] = off
	}
	return s
}

// answers reads a run's answered requests (version 3).
func (d *decoder) answers() []answer {
	n := d.count(1 + len(answer{}.sum))
	if n == 0 {
		return nil
	}
	out := make([]answer, n)
	for i := range out {
		out[i].requestID = d.string()
		copy(out[i].sum[:], d.raw(uint64(len(out[i].sum))))
		if d.err == nil && out[i].requestID == "" {
			d.fail("an answer without a request id")
		}
	}
	return out
}

func (d *decoder) run() tether.Run {
	r := tether.Run{ID: d.string(), ThreadID: d.string(), Agent: d.string()}
	if n := d.count(4); n > 0 {
		r.Input.Messages = make([]tether.InputMessage, n)
		for i := range r.Input.Messages {
			r.Input.Messages[i] = tether.InputMessage{ID: d.string(), Role: tether.Role(d.string()), Content: d.string(), Metadata: d.json()}
		}
	}
	r.Status = tether.RunStatus(d.string())
	if d.flag() {
		r.Error = &tether.ErrorInfo{Code: d.string(), Message: d.string()}
	}
	r.Metadata = d.json()
	r.CreatedAt, r.StartedAt, r.LastUpdateAt, r.CompletedAt = d.timestamp(), d.timestamp(), d.timestamp(), d.timestamp()
	attempt, n := binary.Varint(d.b)
	if n <= 0 || attempt < 0 || attempt > math.MaxInt32 {
		d.fail("bad attempt")
		return r
	}
	d.b = d.b[n:]
	r.Attempt = int(attempt)
	r.WorkerID = d.string()
	r.CancelRequestedAt = d.timestamp()
	if d.flag() {
		r.Request = &tether.Request{ID: d.string(), Kind: d.string(), Payload: d.json()}
	}
	return r
}

// message reads a message: its content, and its state in the machine,
// whose tool calls are those of its tool parts.
func (d *decoder) message() (*content, *msgState) {
	c := &content{id: d.string()}
	ms := &msgState{runID: d.string(), role: tether.Role(d.string()), input: d.flag(), status: tether.MessageStatus(d.string()),
		started: d.timestamp(), updated: d.timestamp()}
	c.meta = d.json()
	if !isObject(c.meta) {
		d.fail("message %s: metadata is not an object", clip.String(c.id, 40))
		return c, ms
	}
	n := d.count(3)
	c.parts = make([]part, n)
	for i := range c.parts {
		p := &c.parts[i]
		p.typ = d.string()
		p.text = d.text()
		hasX := d.flag()
		switch {
		case d.err != nil:
			return c, ms
		case (p.typ == tether.PartTool || p.typ == tether.PartData) != hasX:
			d.fail("message %s: part %d of type %q", c.id, i, clip.String(p.typ, 40))
			return c, ms
		case !hasX && p.typ != tether.PartText && p.typ != tether.PartReasoning:
			d.fail("message %s: part %d of type %q", c.id, i, clip.String(p.typ, 40))
			return c, ms
		case !hasX:
			continue
		}
		p.x = &extra{callID: d.string(), name: d.string(), input: d.json(), output: d.json(), err: d.json(),
			status: d.string(), data: d.json()}
		if p.typ != tether.PartTool {
			continue
		}
		switch st := p.x.status; {
		case st != tether.ToolRunning && st != tether.ToolDone && st != tether.ToolError:
			d.fail("message %s: tool call %q has status %q", c.id, clip.String(p.x.callID, 40), clip.String(st, 40))
		case st == tether.ToolRunning && ms.status.Terminal():
			d.fail("message %s is finished with tool call %q running", c.id, clip.String(p.x.callID, 40))
		case ms.tool(p.x.callID) >= 0:
			d.fail("message %s: tool call %q twice", c.id, clip.String(p.x.callID, 40))
		}
		ms.tools = append(ms.tools, toolState{callID: p.x.callID, status: p.x.status})
	}
	return c, ms
}
