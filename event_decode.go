package tether

import "unicode/utf8"

// decodeEventsFast decodes the batches workers send most: a JSON array of
// objects whose members are all plain strings (no escapes) under the exact
// names of Event's string fields. It reports false for anything else, and
// DecodeEvents then leaves the body to encoding/json, which also gives the
// errors; what it accepts it decodes as encoding/json does
// (TestDecodeFastMatchesJSON, FuzzDecodeFastMatchesJSON). encoding/json's
// decoder, with its copy of the body and its reflection, was a twentieth of
// the server's CPU per one-event append.
func decodeEventsFast(data []byte) ([]*Event, bool) {
	var room [16]member
	d := fastDecoder{data: data, members: room[:0]}
	if !d.byte('[') {
		return nil, false
	}
	if !d.byte(']') {
		for {
			if !d.event() {
				return nil, false
			}
			if d.byte(']') {
				break
			}
			if !d.byte(',') {
				return nil, false
			}
		}
	}
	if !d.end() {
		return nil, false
	}
	// The body is valid. Each field gets its own string: one string of
	// the whole body would be kept alive by any field a thread's state
	// keeps (a message id), long after the body is gone.
	evs := make([]*Event, d.events)
	all := make([]Event, d.events)
	for i := range evs {
		evs[i] = &all[i]
	}
	for _, m := range d.members {
		e, b := evs[m.event], data[m.start:m.end]
		if m.field == fieldType {
			e.Type = eventType(b)
		} else {
			fastFields[m.field].set(e, string(b))
		}
	}
	return evs, true
}

// fastFields are the members decodeEventsFast reads: Event's fields of
// string type, under their exact JSON names.
var fastFields = [...]struct {
	name string
	set  func(e *Event, v string)
}{
	fieldType: {"type", func(e *Event, v string) { e.Type = v }},
	{"run_id", func(e *Event, v string) { e.RunID = v }},
	{"message_id", func(e *Event, v string) { e.MessageID = v }},
	{"role", func(e *Event, v string) { e.Role = Role(v) }},
	{"delta", func(e *Event, v string) { e.Delta = v }},
	{"call_id", func(e *Event, v string) { e.CallID = v }},
	{"name", func(e *Event, v string) { e.Name = v }},
	{"status", func(e *Event, v string) { e.Status = v }},
	{"worker_id", func(e *Event, v string) { e.WorkerID = v }},
	{"request_id", func(e *Event, v string) { e.RequestID = v }},
}

// fieldType is the index of "type" in fastFields: its value is interned.
const fieldType = 0

// fastField returns the index in fastFields of a member's name.
func fastField(name []byte) (int, bool) {
	for i, f := range fastFields {
		if string(name) == f.name {
			return i, true
		}
	}
	return 0, false
}

// member is where one decoded member's value lies in the body; members of
// one event in body order, so that a repeated name keeps its last value,
// as with encoding/json.
type member struct {
	event, field, start, end int
}

// fastDecoder walks data, noting the members of each event.
type fastDecoder struct {
	data    []byte
	i       int
	events  int
	members []member
}

// space skips JSON whitespace.
func (d *fastDecoder) space() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// byte consumes c after any whitespace, if it is next.
func (d *fastDecoder) byte(c byte) bool {
	d.space()
	if d.i < len(d.data) && d.data[d.i] == c {
		d.i++
		return true
	}
	return false
}

// end reports whether only whitespace is left.
func (d *fastDecoder) end() bool {
	d.space()
	return d.i == len(d.data)
}

// str consumes a string without escapes or control characters, of valid
// UTF-8, and returns where its contents lie.
func (d *fastDecoder) str() (start, end int, ok bool) {
	if !d.byte('"') {
		return 0, 0, false
	}
	start, ascii := d.i, true
	for ; d.i < len(d.data); d.i++ {
		switch c := d.data[d.i]; {
		case c == '"':
			end = d.i
			d.i++
			return start, end, ascii || utf8.Valid(d.data[start:end])
		case c == '\\' || c < 0x20:
			return 0, 0, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return 0, 0, false
}

// event consumes one object of string members.
func (d *fastDecoder) event() bool {
	if !d.byte('{') {
		return false
	}
	ev := d.events
	d.events++
	if d.byte('}') {
		return true
	}
	for {
		ks, ke, ok := d.str()
		if !ok || !d.byte(':') {
			return false
		}
		f, known := fastField(d.data[ks:ke])
		if !known {
			return false
		}
		vs, ve, ok := d.str()
		if !ok {
			return false
		}
		d.members = append(d.members, member{event: ev, field: f, start: vs, end: ve})
		if d.byte('}') {
			return true
		}
		if !d.byte(',') {
			return false
		}
	}
}

// eventTypes are the event types a worker appends, so that decoding one
// needs no new string.
var eventTypes = []string{
	EventMessageStarted, EventTextDelta, EventReasoningDelta, EventToolStarted, EventToolDelta,
	EventToolFinished, EventMessageUpdated, EventMessageFinished, EventMessageCreated,
	EventRunWaiting, EventCustom, EventStateSnapshot, EventStateDelta, EventRunFinished,
}

// eventType returns b as a string, the constant when it is a known type.
func eventType(b []byte) string {
	for _, t := range eventTypes {
		if string(b) == t {
			return t
		}
	}
	return string(b)
}
