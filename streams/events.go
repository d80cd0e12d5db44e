package streams

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/nest"
)

// Event types of stream logs.
const (
	// EventData carries appended data: for a JSON stream, "data" is a JSON
	// array of the messages of one append (or part of one); otherwise a
	// JSON string, the bytes in base64. An append larger than a chunk is
	// stored as several, committed together, each a position; every one
	// but the last has the status "continues" (statusContinues).
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

// statusContinues is the status of a data event that holds a piece of an
// append that goes on in the next event of the same log (every piece of a
// large append but its last). It lets a fork's sub-offset reach into the
// whole append. Appends stored before pieces were marked have no status:
// each of their pieces reads as an append of its own, as it always did.
const statusContinues = "continues"

// record is the part of a stored event that reads need.
type record struct {
	Type   string          `json:"type"`
	Status string          `json:"status"`
	Data   json.RawMessage `json:"data"`
}

// decodePiece returns the items a record holds: JSON messages (raw) for a
// JSON stream, else one byte slice; close events hold none. It also
// returns whether the record is a piece of an append that continues in the
// next event of its log.
func decodePiece(r *tether.Record, jsonMode bool) (items [][]byte, continues bool, err error) {
	if r.Type != EventData {
		return nil, false, nil
	}
	data, continues, err := eventPiece(r)
	if err != nil {
		return nil, false, err
	}
	if jsonMode {
		items, err := splitArray(data)
		if err != nil {
			return nil, false, fmt.Errorf("decode event %s: %w", r.Offset, err)
		}
		return items, continues, nil
	}
	b, err := decodeBytes(r, data)
	if err != nil {
		return nil, false, err
	}
	return [][]byte{b}, continues, nil
}

// eventData returns the data of a stored data event. Catch-up reads go
// through every byte of a stream (twice past their first MiB), so the
// layout this package writes is read directly, without decoding the whole
// event (which costs as much again as the data): a data event has only a
// type, a time and data, so it is stored (tether.Event.Encode, then the
// offset added first) as {"offset":"…","type":"ds.data","ts":"…","data":…}.
// The piece of a large append that continues in the next event has its
// status between the time and the data (…,"status":"continues","data":…).
// Anything else is decoded. (TestEventLayout checks the layout.)
func eventData(r *tether.Record) (json.RawMessage, error) {
	d, _, err := eventPiece(r)
	return d, err
}

// eventPiece returns the data of a stored data event and whether it is a
// piece of an append that continues in the next event.
func eventPiece(r *tether.Record) (json.RawMessage, bool, error) {
	if d, continues, ok := layoutData(r.Data); ok {
		return d, continues, nil
	}
	var rec record
	if err := json.Unmarshal(r.Data, &rec); err != nil {
		return nil, false, fmt.Errorf("decode event %s: %w", r.Offset, err)
	}
	return rec.Data, rec.Status == statusContinues, nil
}

// layoutData returns the data of an event stored in the layout of a data
// event (see eventData), and whether its status is statusContinues.
func layoutData(b []byte) (data json.RawMessage, continues bool, ok bool) {
	rest, ok := bytes.CutPrefix(b, []byte(`{"offset":"`))
	if !ok {
		return nil, false, false
	}
	i := bytes.IndexByte(rest, '"')
	if i < 0 || strings.Trim(string(rest[:i]), "0123456789_") != "" {
		return nil, false, false
	}
	if rest, ok = bytes.CutPrefix(rest[i:], []byte(`","type":"`+EventData+`","ts":"`)); !ok {
		return nil, false, false
	}
	if i = bytes.IndexAny(rest, `"\`); i < 0 || rest[i] != '"' {
		return nil, false, false
	}
	rest = rest[i:]
	if r, ok := bytes.CutPrefix(rest, []byte(`","status":"`+statusContinues)); ok {
		rest, continues = r, true
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`","data":`)); !ok || len(rest) < 3 || rest[len(rest)-1] != '}' {
		return nil, false, false
	}
	d := rest[:len(rest)-1]
	if d[0] == '[' && closes(d) || isPlainString(d) {
		return d, continues, true
	}
	return nil, false, false
}

// closes reports whether the JSON array or object that d starts with ends
// exactly at the end of d (no other field follows it). It only follows
// strings and brackets: d is JSON this package wrote.
func closes(d []byte) bool {
	depth, inString := 0, false
	for i := 0; i < len(d); i++ {
		c := d[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
			if depth == 0 {
				return i == len(d)-1
			}
		}
	}
	return false
}

// isPlainString reports whether d is a JSON string without escapes (as
// base64 in JSON always is).
func isPlainString(d []byte) bool {
	return len(d) >= 2 && d[0] == '"' && d[len(d)-1] == '"' && bytes.IndexByte(d[1:len(d)-1], '"') < 0 &&
		bytes.IndexByte(d, '\\') < 0
}

// decodeBytes decodes the data of a byte stream's event: its bytes in
// base64, a JSON string.
func decodeBytes(r *tether.Record, data json.RawMessage) ([]byte, error) {
	if isPlainString(data) {
		enc := data[1 : len(data)-1]
		out := make([]byte, base64.StdEncoding.DecodedLen(len(enc)))
		n, err := base64.StdEncoding.Decode(out, enc)
		if err != nil {
			return nil, fmt.Errorf("decode event %s: %w", r.Offset, err)
		}
		return out[:n], nil
	}
	var b []byte
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("decode event %s: %w", r.Offset, err)
	}
	return b, nil
}

// decodedLen returns the length of the bytes that decodeBytes returns,
// without decoding them when it can.
func decodedLen(r *tether.Record, data json.RawMessage) (int, error) {
	if isPlainString(data) {
		enc := data[1 : len(data)-1]
		n := len(enc) / 4 * 3
		if len(enc)%4 != 0 {
			return 0, fmt.Errorf("decode event %s: base64 of %d bytes", r.Offset, len(enc))
		}
		if len(enc) > 0 && enc[len(enc)-1] == '=' {
			n--
			if enc[len(enc)-2] == '=' {
				n--
			}
		}
		return n, nil
	}
	b, err := decodeBytes(r, data)
	return len(b), err
}

// jsonMessages is the messages of a JSON append, compacted and separated
// by commas: the inside of a JSON array. It is kept as one slice rather
// than one per message, so that an append of a million tiny messages (a
// 4 MiB `[0,0,…]`) costs about its size, not a slice and a buffer per
// message (about 100 times its size).
type jsonMessages []byte

// joinMessages returns items, each a JSON message, as jsonMessages.
func joinMessages(items [][]byte) jsonMessages {
	return bytes.Join(items, []byte{','})
}

// firstMessage returns the length of the first message of list: up to its
// first comma outside any string, array or object.
func firstMessage(list []byte) int {
	depth, inString := 0, false
	for i := 0; i < len(list); i++ {
		switch c := list[i]; {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
		case c == ',' && depth == 0:
			return i
		}
	}
	return len(list)
}

// splitArray returns the elements of a JSON array, slices of data: a
// read of tiny messages costs a slice header each, not a decoded copy.
func splitArray(data []byte) ([][]byte, error) {
	data = bytes.Trim(data, " \t\r\n")
	if len(data) < 2 || data[0] != '[' || !json.Valid(data) {
		return nil, errors.New("the data is not a JSON array")
	}
	list := bytes.Trim(data[1:len(data)-1], " \t\r\n")
	if len(list) == 0 {
		return nil, nil
	}
	n := 1
	for rest := list; ; n++ {
		k := firstMessage(rest)
		if k == len(rest) {
			break
		}
		rest = rest[k+1:]
	}
	items := make([][]byte, 0, n)
	for {
		k := firstMessage(list)
		items = append(items, bytes.Trim(list[:k], " \t\r\n"))
		if k == len(list) {
			return items, nil
		}
		list = list[k+1:]
	}
}

// dataEvents returns the events that store one append of body: JSON
// messages grouped into events of at most chunk bytes, or the bytes cut
// into chunks. Every event but the last is marked statusContinues, so that
// the append can be told whole from its pieces.
func dataEvents(now tether.Time, jsonMsgs jsonMessages, body []byte, jsonMode bool, chunk int) []*tether.Event {
	evs := dataPieces(now, jsonMsgs, body, jsonMode, chunk)
	for _, ev := range evs[:max(len(evs)-1, 0)] {
		ev.Status = statusContinues
	}
	return evs
}

// dataPieces cuts an append into events (see dataEvents), unmarked.
func dataPieces(now tether.Time, jsonMsgs jsonMessages, body []byte, jsonMode bool, chunk int) []*tether.Event {
	var evs []*tether.Event
	if jsonMode {
		list := []byte(jsonMsgs)
		for len(list) > 0 {
			// As many whole messages as fit, with the brackets, in
			// chunk bytes; at least one.
			end := firstMessage(list)
			for end < len(list) {
				n := firstMessage(list[end+1:])
				if 1+end+n > chunk {
					break
				}
				end += 1 + n
			}
			data := make(json.RawMessage, 0, end+2)
			data = append(append(append(data, '['), list[:end]...), ']')
			evs = append(evs, &tether.Event{Type: EventData, TS: now, Data: data})
			list = list[min(end+1, len(list)):]
		}
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
func parseJSONBody(body []byte, allowEmpty bool) (jsonMessages, error) {
	// JSON's whitespace only (RFC 8259 §2): bytes.TrimSpace would also take
	// a form feed, a vertical tab, U+0085 or U+00A0, which are not JSON.
	body = bytes.Trim(body, " \t\r\n")
	// json.Valid does not look at the encoding; JSON is UTF-8 (RFC 8259
	// §8.1), and what is stored is read back byte for byte.
	if !utf8.Valid(body) || !json.Valid(body) {
		return nil, errorf(CodeBadRequest, "the body is not valid JSON")
	}
	// What is stored is read back by every client of the stream, and not
	// every decoder reads what Go's does: the body nests at most as deep
	// as any request body may (nest.Max, its own level counted).
	if !nest.Within(body, nest.Max) {
		return nil, errorf(CodeBadRequest, "the body is nested more than %d levels deep", nest.Max)
	}
	// Compacting the whole body compacts each message and leaves one
	// comma between them.
	var buf bytes.Buffer
	buf.Grow(len(body))
	_ = json.Compact(&buf, body)
	c := buf.Bytes()
	if c[0] != '[' {
		return c, nil
	}
	if len(c) == 2 && !allowEmpty {
		return nil, errorf(CodeBadRequest, "an append of an empty JSON array has no messages")
	}
	return c[1 : len(c)-1], nil
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
