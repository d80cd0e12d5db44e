package client

import (
	"bytes"
	"errors"
	"io"
	"strconv"
)

// maxFrame bounds one SSE line and one frame's data. Events are at most
// 1 MiB, but a snapshot holds a whole thread.
const maxFrame = 64 << 20

// errFrameTooLarge ends a stream whose frame passes maxFrame.
var errFrameTooLarge = errors.New("event stream frame is larger than 64 MiB")

// An sseFrame is one frame of a Server-Sent Events stream.
type sseFrame struct {
	// Event is the event type; "message" when the frame named none.
	Event string
	// Data is the frame's data lines joined with "\n".
	Data string
	// ID is the value of the frame's own id field, if HasID. Unlike the
	// WHATWG lastEventId, it does not carry over from earlier frames.
	ID    string
	HasID bool
	// Retry is the frame's retry field in milliseconds, or -1.
	Retry int
	// NoData marks a frame that had fields but no data line. Browsers do
	// not dispatch these; they are reported so that a bare
	// "event: reconnect" is not lost.
	NoData bool
}

var bom = []byte{0xEF, 0xBB, 0xBF}

// An sseReader parses a Server-Sent Events stream per the WHATWG rules:
// fields id, event, data and retry; comments; data lines joined with "\n";
// CR, LF and CRLF line endings (a CRLF split across reads counts once);
// a leading UTF-8 BOM is skipped; a last frame without its blank line is
// dropped. Bytes are passed through as they are, not UTF-8 validated.
type sseReader struct {
	r      io.Reader
	buf    []byte
	pos    int   // buf[pos:] is unread
	err    error // sticky read error
	bomOK  bool  // the BOM check is done
	skipLF bool  // the last line ended with CR: a LF right after belongs to it
	seen   int   // buf[pos:pos+seen] holds no line ending: no need to scan it again
	max    int   // the longest line or frame data; maxFrame

	// The frame being read.
	frame   sseFrame
	data    []byte
	hasData bool
	fields  bool // some field other than a comment was seen
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: r, buf: make([]byte, 0, 4096), frame: sseFrame{Retry: -1}, max: maxFrame}
}

// next returns the next frame. At the end of the stream it returns io.EOF
// (or the read error), dropping an unfinished frame.
func (p *sseReader) next() (sseFrame, error) {
	for {
		line, err := p.line()
		if err != nil {
			return sseFrame{}, err
		}
		if len(line) == 0 {
			if p.fields {
				return p.dispatch(), nil
			}
			continue
		}
		if err := p.field(line); err != nil {
			return sseFrame{}, err
		}
	}
}

func (p *sseReader) dispatch() sseFrame {
	f := p.frame
	if f.Event == "" {
		f.Event = "message"
	}
	if p.hasData {
		f.Data = string(p.data[:len(p.data)-1]) // drop the last "\n"
	} else {
		f.NoData = true
	}
	p.frame = sseFrame{Retry: -1}
	p.data = p.data[:0]
	p.hasData, p.fields = false, false
	return f
}

func (p *sseReader) field(line []byte) error {
	if line[0] == ':' {
		return nil // a comment
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "event":
		p.frame.Event = string(value)
	case "data":
		if len(p.data)+len(value) >= p.max {
			return errFrameTooLarge
		}
		p.data = append(p.data, value...)
		p.data = append(p.data, '\n')
		p.hasData = true
	case "id":
		if bytes.IndexByte(value, 0) >= 0 {
			return nil // ignored, per the spec
		}
		p.frame.ID, p.frame.HasID = string(value), true
	case "retry":
		if !allDigits(value) {
			return nil
		}
		n, err := strconv.Atoi(string(value))
		if err != nil {
			return nil // too large: ignored like any invalid value
		}
		p.frame.Retry = n
	default:
		return nil // unknown fields are ignored
	}
	p.fields = true
	return nil
}

func allDigits(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// line returns the next line without its ending. The slice is valid until
// the next call.
func (p *sseReader) line() ([]byte, error) {
	for !p.bomOK {
		b := p.buf[p.pos:]
		switch {
		case len(b) >= len(bom) || !bytes.HasPrefix(bom, b):
			if bytes.HasPrefix(b, bom) {
				p.pos += len(bom)
			}
			p.bomOK = true
		case p.err != nil:
			p.bomOK = true
		default:
			p.fill()
		}
	}
	for {
		if p.skipLF && p.pos < len(p.buf) {
			if p.buf[p.pos] == '\n' {
				p.pos++
			}
			p.skipLF = false
		}
		b := p.buf[p.pos:]
		for i := p.seen; i < len(b); i++ {
			if c := b[i]; c == '\n' || c == '\r' {
				p.pos += i + 1
				p.skipLF = c == '\r'
				p.seen = 0
				return b[:i], nil
			}
		}
		p.seen = len(b)
		if p.err != nil {
			return nil, p.err
		}
		if len(b) >= p.max {
			return nil, errFrameTooLarge
		}
		p.fill()
	}
}

// fill reads more bytes into buf, keeping the unread ones.
func (p *sseReader) fill() {
	if p.pos > 0 {
		n := copy(p.buf, p.buf[p.pos:])
		p.buf = p.buf[:n]
		p.pos = 0
	}
	if len(p.buf) == cap(p.buf) {
		p.buf = append(p.buf, make([]byte, len(p.buf))...)[:len(p.buf)] // doubles
	}
	for range 100 {
		n, err := p.r.Read(p.buf[len(p.buf):cap(p.buf)])
		p.buf = p.buf[:len(p.buf)+n]
		if err != nil {
			p.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	p.err = io.ErrNoProgress
}
