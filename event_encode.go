package tether

import (
	"strconv"
	"unicode/utf8"
)

// appendEvent appends the JSON of e without its offset, byte for byte what
// encoding/json makes of it (TestEncodeMatchesJSON, FuzzEncodeMatchesJSON),
// and reports true; or reports false, appending nothing, when e has a raw
// JSON value or a nested object. Those stay with encoding/json, which checks
// and compacts raw values. The events appended most (text, reasoning and
// tool deltas, message starts) have neither, and encoding/json's reflection
// was a twentieth of the server's CPU per one-event append.
func appendEvent(b []byte, e *Event) ([]byte, bool) {
	if len(e.Metadata) > 0 || len(e.Input) > 0 || len(e.Output) > 0 || len(e.Error) > 0 ||
		len(e.Data) > 0 || len(e.Value) > 0 || len(e.State) > 0 || len(e.Patch) > 0 ||
		e.Request != nil || e.Run != nil || e.Message != nil {
		return b, false
	}
	b = append(b, `{"type":`...)
	b = appendJSONString(b, e.Type)
	b = append(b, `,"ts":`...)
	if e.TS.IsZero() {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = e.TS.UTC().AppendFormat(b, TimeLayout)
		b = append(b, '"')
	}
	b = appendStringField(b, `,"run_id":`, e.RunID)
	b = appendStringField(b, `,"message_id":`, e.MessageID)
	b = appendStringField(b, `,"role":`, string(e.Role))
	b = appendStringField(b, `,"delta":`, e.Delta)
	b = appendStringField(b, `,"call_id":`, e.CallID)
	b = appendStringField(b, `,"name":`, e.Name)
	b = appendStringField(b, `,"status":`, e.Status)
	b = appendStringField(b, `,"worker_id":`, e.WorkerID)
	if e.Attempt != 0 {
		b = append(b, `,"attempt":`...)
		b = strconv.AppendInt(b, int64(e.Attempt), 10)
	}
	b = appendStringField(b, `,"request_id":`, e.RequestID)
	return append(b, '}'), true
}

// appendStringField appends key and s, or nothing when s is empty
// (omitempty).
func appendStringField(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendJSONString(append(b, key...), s)
}

// appendJSONString appends s as a JSON string the way encoding/json does:
// the short escapes (\" \\ \b \f \n \r \t), \u00XX for the other control
// characters and for <, > and &, \ufffd for each byte of invalid UTF-8,
// and \u2028 and \u2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// encodeSize is room for e's JSON in the common case: the fixed keys and
// time, and each string once, unescaped.
func encodeSize(e *Event) int {
	return 128 + len(e.Type) + len(e.RunID) + len(e.MessageID) + len(e.Role) + len(e.Delta) +
		len(e.CallID) + len(e.Name) + len(e.Status) + len(e.WorkerID) + len(e.RequestID)
}
