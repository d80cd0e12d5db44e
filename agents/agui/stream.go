package agui

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// maxFrame bounds one SSE frame of the upstream: an event Tether could not
// store anyway (an event is at most 1 MiB by default) is refused before
// it is all read.
const maxFrame = 8 << 20

var errFrameTooLarge = errors.New("an event over 8 MiB")

// frames reads an SSE stream (the WHATWG rules: data lines joined with
// "\n", comments, event, id and retry fields ignored, CR, LF or CRLF line
// ends) and calls fn with the data of each frame that has any. It returns
// nil at the end of the stream, fn's error, or a read error.
//
// Unlike EventSource, a last frame that the end of the stream cuts short
// of its blank line is not dropped: @ag-ui/client's parser reads what is
// left when the body ends, and an agent whose last event is written so
// must finish behind Tether as it does there. (A body cut by a dropped
// connection is a read error, not the end.)
func frames(r io.Reader, fn func(data []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var data []byte
	has := false
	for {
		line, err := readLine(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				if has {
					return fn(data)
				}
				return nil
			}
			return err
		}
		if len(line) == 0 {
			if has {
				if err := fn(data); err != nil {
					return err
				}
			}
			data, has = data[:0], false
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		if string(field) != "data" {
			continue
		}
		if has {
			data = append(data, '\n')
		}
		if len(data)+len(value) > maxFrame {
			return errFrameTooLarge
		}
		data, has = append(data, value...), true
	}
}

// readLine returns the next line without its end (CR, LF or CRLF).
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		b, err := br.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) && len(line) > 0 {
				return line, nil
			}
			return nil, err
		}
		switch b {
		case '\n':
			return line, nil
		case '\r':
			if next, err := br.Peek(1); err == nil && next[0] == '\n' {
				_, _ = br.ReadByte()
			}
			return line, nil
		}
		if len(line) > maxFrame {
			return nil, errFrameTooLarge
		}
		line = append(line, b)
	}
}
