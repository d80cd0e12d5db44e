package client

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// parseAll reads every frame of a stream fed in the given chunk sizes
// (cycled; none means all at once).
func parseAll(t testing.TB, in []byte, chunks []int) ([]sseFrame, error) {
	t.Helper()
	p := newSSEReader(&chunkReader{b: in, sizes: chunks})
	var out []sseFrame
	for {
		f, err := p.next()
		if err != nil {
			return out, err
		}
		out = append(out, f)
		if len(out) > len(in)+1 {
			t.Fatalf("more frames than bytes: the parser loops")
		}
	}
}

// chunkReader returns b in pieces of the given sizes, cycled.
type chunkReader struct {
	b     []byte
	sizes []int
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := len(r.b)
	if len(r.sizes) > 0 {
		n = max(1, r.sizes[r.i%len(r.sizes)])
		r.i++
	}
	n = min(n, len(p), len(r.b))
	copy(p, r.b[:n])
	r.b = r.b[n:]
	return n, nil
}

func msg(event, data string) sseFrame { return sseFrame{Event: event, Data: data, Retry: -1} }

func TestSSE(t *testing.T) {
	withID := func(f sseFrame, id string) sseFrame { f.ID, f.HasID = id, true; return f }
	tests := []struct {
		name string
		in   string
		want []sseFrame
	}{
		{"simple", "event: a\ndata: x\n\n", []sseFrame{msg("a", "x")}},
		{"default type", "data: x\n\n", []sseFrame{msg("message", "x")}},
		{"multi-line data", "data: a\ndata: b\ndata\n\n", []sseFrame{msg("message", "a\nb\n")}},
		{"empty data", "data\n\n", []sseFrame{msg("message", "")}},
		{"no space", "data:x\n\n", []sseFrame{msg("message", "x")}},
		{"one space only", "data:  x\n\n", []sseFrame{msg("message", " x")}},
		{"colon in value", "data: a: b\n\n", []sseFrame{msg("message", "a: b")}},
		{"comments", ":ok\n\n: c\ndata: x\n: d\n\n", []sseFrame{msg("message", "x")}},
		{"CRLF", "event: a\r\ndata: x\r\n\r\n", []sseFrame{msg("a", "x")}},
		{"CR", "event: a\rdata: x\r\r", []sseFrame{msg("a", "x")}},
		{"mixed", "data: a\r\ndata: b\rdata: c\n\r\n", []sseFrame{msg("message", "a\nb\nc")}},
		{"BOM", "\xEF\xBB\xBFdata: x\n\n", []sseFrame{msg("message", "x")}},
		{"BOM only once", "\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\n", nil},
		{"id", "id: 7\ndata: x\n\n", []sseFrame{withID(msg("message", "x"), "7")}},
		{"id does not carry over", "id: 7\ndata: x\n\ndata: y\n\n", []sseFrame{withID(msg("message", "x"), "7"), msg("message", "y")}},
		{"id with NUL ignored", "id: a\x00b\ndata: x\n\n", []sseFrame{msg("message", "x")}},
		{"retry", "retry: 1500\ndata: x\n\n", []sseFrame{{Event: "message", Data: "x", Retry: 1500}}},
		{"bad retry", "retry: 15s\ndata: x\n\n", []sseFrame{msg("message", "x")}},
		{"unknown field", "foo: bar\ndata: x\n\n", []sseFrame{msg("message", "x")}},
		{"field without colon", "event\ndata: x\n\n", []sseFrame{msg("message", "x")}},
		{"no data", "event: reconnect\n\n", []sseFrame{{Event: "reconnect", Retry: -1, NoData: true}}},
		{"event resets", "event: a\n\ndata: x\n\n", []sseFrame{{Event: "a", Retry: -1, NoData: true}, msg("message", "x")}},
		{"last frame dropped", "data: x\n\ndata: y\n", []sseFrame{msg("message", "x")}},
		{"blank lines", "\n\n\r\n\rdata: x\n\n\n", []sseFrame{msg("message", "x")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunks := range [][]int{nil, {1}, {2, 3}, {5, 1, 7}} {
				got, err := parseAll(t, []byte(tc.in), chunks)
				if err != io.EOF {
					t.Fatalf("chunks %v: err = %v, want EOF", chunks, err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("chunks %v:\n got %+v\nwant %+v", chunks, got, tc.want)
				}
			}
		})
	}
}

// A CR at the end of what has arrived must end the frame at once, without
// waiting for the next byte to see whether it is a LF.
func TestSSECRDoesNotWait(t *testing.T) {
	pr, pw := io.Pipe()
	defer pr.Close()
	go func() { _, _ = pw.Write([]byte("data: x\r\r")) }() // then the writer stays open
	p := newSSEReader(pr)
	f, err := p.next()
	if err != nil || f.Data != "x" {
		t.Fatalf("next = %+v, %v", f, err)
	}
}

func TestSSEReadError(t *testing.T) {
	boom := errors.New("boom")
	p := newSSEReader(io.MultiReader(strings.NewReader("data: x\n\ndata: y\n"), iotest.ErrReader(boom)))
	if f, err := p.next(); err != nil || f.Data != "x" {
		t.Fatalf("first = %+v, %v", f, err)
	}
	if _, err := p.next(); err != boom {
		t.Fatalf("second: err = %v, want boom", err)
	}
}

func TestSSETooLarge(t *testing.T) {
	for name, in := range map[string]string{
		"line": "data: " + strings.Repeat("a", 1000),
		"data": strings.Repeat("data: "+strings.Repeat("a", 90)+"\n", 12),
	} {
		p := newSSEReader(&chunkReader{b: []byte(in), sizes: []int{7}})
		p.max = 1000
		if _, err := p.next(); err != errFrameTooLarge {
			t.Errorf("%s: err = %v, want errFrameTooLarge", name, err)
		}
	}
}

// encodeFrames writes frames as a server would, with the given line ending
// and a comment between frames. Data lines are split on any line ending.
func encodeFrames(frames []sseFrame, eol string) []byte {
	var b bytes.Buffer
	for i, f := range frames {
		if i%2 == 1 {
			b.WriteString(":c" + eol)
		}
		if f.Event != "" && f.Event != "message" {
			b.WriteString("event: " + f.Event + eol)
		}
		if f.HasID {
			b.WriteString("id: " + f.ID + eol)
		}
		if f.Retry >= 0 {
			fmt.Fprintf(&b, "retry: %d%s", f.Retry, eol)
		}
		if !f.NoData {
			for _, l := range splitLines(f.Data) {
				b.WriteString("data: " + l + eol)
			}
		}
		b.WriteString(eol)
	}
	return b.Bytes()
}

func splitLines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.Split(strings.ReplaceAll(s, "\r", "\n"), "\n")
}

// framesFrom derives frames from fuzz input: each field is a slice of the
// input, cleaned of what a field cannot hold.
func framesFrom(data []byte) []sseFrame {
	var out []sseFrame
	parts := bytes.Split(data, []byte{0xFF})
	for i := 0; i+2 < len(parts); i += 3 {
		clean := func(b []byte) string {
			return strings.NewReplacer("\r", "", "\n", "", "\x00", "").Replace(string(b))
		}
		f := sseFrame{Event: clean(parts[i]), Retry: -1}
		if f.Event == "" {
			f.Event = "message"
		}
		if len(parts[i+1]) > 0 {
			f.ID, f.HasID = clean(parts[i+1][1:]), true
			if parts[i+1][0]%3 == 0 {
				f.Retry = int(parts[i+1][0])
			}
		}
		f.Data = strings.Join(splitLines(string(parts[i+2])), "\n")
		if len(parts[i+2]) > 0 && parts[i+2][0] == 0xFE {
			f.Data, f.NoData = "", true
			if f.Event == "message" && !f.HasID && f.Retry < 0 {
				f.Event = "ping" // a frame with no field at all is not a frame
			}
		}
		out = append(out, f)
	}
	return out
}

func FuzzSSE(f *testing.F) {
	f.Add([]byte("event: a\ndata: x\n\n"))
	f.Add([]byte("a\xff\x037\xffx\ny\xff\xff\xff\xfe"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rng := rand.New(rand.NewPCG(uint64(len(data)), 1))
		chunks := make([]int, 1+rng.IntN(8))
		for i := range chunks {
			chunks[i] = 1 + rng.IntN(16)
		}

		// Arbitrary bytes: no panic, and the same frames whatever the chunks.
		whole, err1 := parseAll(t, data, nil)
		split, err2 := parseAll(t, data, chunks)
		if err1 != io.EOF || err2 != io.EOF {
			t.Fatalf("errors %v, %v; want EOF", err1, err2)
		}
		if !reflect.DeepEqual(whole, split) {
			t.Fatalf("chunks %v change the frames:\n%+v\n%+v", chunks, whole, split)
		}

		// Round trip of well-formed frames, with each line ending.
		frames := framesFrom(data)
		for _, eol := range []string{"\n", "\r", "\r\n"} {
			enc := encodeFrames(frames, eol)
			if rng.IntN(2) == 0 {
				enc = append([]byte("\xEF\xBB\xBF"), enc...)
			}
			got, err := parseAll(t, enc, chunks)
			if err != io.EOF {
				t.Fatalf("err = %v", err)
			}
			if len(got) == 0 && len(frames) == 0 {
				continue
			}
			if !reflect.DeepEqual(got, frames) {
				t.Fatalf("eol %q chunks %v:\n got %+v\nwant %+v\nencoded %q", eol, chunks, got, frames, enc)
			}
		}
	})
}
