package streams

import (
	"bytes"
	"encoding/json"
	"fmt"

	tether "github.com/tetherhq/tether"
)

// Event types of stream logs.
const (
	// EventData carries appended data: for a JSON stream, "data" is a JSON
	// array of the messages of one append (or part of one); otherwise a
	// JSON string, the bytes in base64.
	EventData = "ds.data"
	// EventClose closes the stream; it carries no data. It is a position
	// of the stream (the tail of a closed stream), so that readers
	// following the log see the close in order, right after the last data.
	EventClose = "ds.close"
	// EventDeleted marks a stream deleted: it is the last event of a
	// stream that forks still read (which answers gone), and on a shared
	// store it precedes every deletion, so that live readers on every node
	// end and writes racing the deletion fail. It carries no data, and
	// nothing reads past it.
	EventDeleted = "ds.deleted"
	// EventRef, in a stream's log of fork references, records a fork about
	// to be created; its data is the fork's thread ID.
	EventRef = "ds.ref"
)

// record is the part of a stored event that reads need.
type record struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// decodeItems returns the items a record holds: JSON messages (raw) for a
// JSON stream, else one byte slice. Close events hold none.
func decodeItems(r *tether.Record, jsonMode bool) ([][]byte, error) {
	if r.Type != EventData {
		return nil, nil
	}
	var rec record
	if err := json.Unmarshal(r.Data, &rec); err != nil {
		return nil, fmt.Errorf("decode event %s: %w", r.Offset, err)
	}
	if jsonMode {
		var msgs []json.RawMessage
		if err := json.Unmarshal(rec.Data, &msgs); err != nil {
			return nil, fmt.Errorf("decode event %s: %w", r.Offset, err)
		}
		out := make([][]byte, len(msgs))
		for i, m := range msgs {
			out[i] = m
		}
		return out, nil
	}
	var b []byte
	if err := json.Unmarshal(rec.Data, &b); err != nil {
		return nil, fmt.Errorf("decode event %s: %w", r.Offset, err)
	}
	return [][]byte{b}, nil
}

// dataEvents returns the events that store body: JSON messages grouped
// into events of at most chunk bytes, or the bytes cut into chunks.
func dataEvents(now tether.Time, jsonMsgs []json.RawMessage, body []byte, jsonMode bool, chunk int) []*tether.Event {
	var evs []*tether.Event
	if jsonMode {
		var buf bytes.Buffer
		n := 0
		flush := func() {
			if n == 0 {
				return
			}
			buf.WriteByte(']')
			evs = append(evs, &tether.Event{Type: EventData, TS: now, Data: append(json.RawMessage(nil), buf.Bytes()...)})
			buf.Reset()
			n = 0
		}
		for _, m := range jsonMsgs {
			if n > 0 && buf.Len()+len(m) > chunk {
				flush()
			}
			if n == 0 {
				buf.WriteByte('[')
			} else {
				buf.WriteByte(',')
			}
			buf.Write(m)
			n++
		}
		flush()
		return evs
	}
	for len(body) > 0 {
		n := min(len(body), chunk)
		b, _ := json.Marshal(body[:n]) // base64 string
		evs = append(evs, &tether.Event{Type: EventData, TS: now, Data: b})
		body = body[n:]
	}
	return evs
}

// parseJSONBody checks a JSON append and flattens one level of array: each
// element of a top-level array is one message, anything else is one
// message. An empty array is refused unless allowEmpty (a create).
func parseJSONBody(body []byte, allowEmpty bool) ([]json.RawMessage, error) {
	body = bytes.TrimSpace(body)
	if !json.Valid(body) {
		return nil, errorf(CodeBadRequest, "the body is not valid JSON")
	}
	if body[0] != '[' {
		var buf bytes.Buffer
		_ = json.Compact(&buf, body)
		return []json.RawMessage{buf.Bytes()}, nil
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(body, &msgs); err != nil {
		return nil, errorf(CodeBadRequest, "the body is not valid JSON")
	}
	if len(msgs) == 0 && !allowEmpty {
		return nil, errorf(CodeBadRequest, "an append of an empty JSON array has no messages")
	}
	for i, m := range msgs {
		var buf bytes.Buffer
		_ = json.Compact(&buf, m)
		msgs[i] = buf.Bytes()
	}
	return msgs, nil
}

// encodeAll encodes events for a batch.
func encodeAll(evs []*tether.Event) ([][]byte, error) {
	out := make([][]byte, len(evs))
	for i, ev := range evs {
		b, err := ev.Encode()
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}
