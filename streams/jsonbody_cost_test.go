package streams_test

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/tetherhq/tether/streams"
)

// tinyMessages is a JSON append of n tiny messages: `[0,0,…]`, 2n bytes.
func tinyMessages(n int) []byte {
	body := append([]byte{'['}, bytes.Repeat([]byte("0,"), n-1)...)
	return append(body, '0', ']')
}

// allocated returns the bytes f allocates on the heap (the store's and the
// hub's goroutines included).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

const tinyCount = 256 << 10 // a quarter million messages, 512 KiB

// TestJSONAppendOfTinyMessages appends, to a JSON stream, an array of a
// quarter million tiny messages and checks what the append allocates
// against its size: a slice and a buffer per message made it about 100
// times the body; the stored events and their commit take a few times.
func TestJSONAppendOfTinyMessages(t *testing.T) {
	e := newEnv(t, streams.Options{})
	e.create(streams.CreateRequest{Path: "tiny", ContentType: "application/json"})
	body := tinyMessages(tinyCount)
	got := allocated(func() {
		if _, err := e.svc.Append(context.Background(), streams.AppendRequest{Path: "tiny", ContentType: "application/json", Body: body}); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%d bytes allocated, %.1f times the body", got, float64(got)/float64(len(body)))
	if got > 20*uint64(len(body)) {
		t.Errorf("an append of %d bytes (%d messages) allocated %d bytes: %.0f times its size, want at most 20",
			len(body), tinyCount, got, float64(got)/float64(len(body)))
	}
}

// TestJSONReadOfTinyMessages reads such an append back: every message, at
// the cost of a slice header each (24 bytes, 12 times a 2-byte message)
// and what the store reads; a decoded copy of each made it about 100 times.
func TestJSONReadOfTinyMessages(t *testing.T) {
	e := newEnv(t, streams.Options{})
	e.create(streams.CreateRequest{Path: "tiny", ContentType: "application/json"})
	body := tinyMessages(tinyCount)
	if _, err := e.svc.Append(context.Background(), streams.AppendRequest{Path: "tiny", ContentType: "application/json", Body: body}); err != nil {
		t.Fatal(err)
	}
	read := 0
	got := allocated(func() {
		for offset, done := "-1", false; !done; {
			res, err := e.svc.Read(context.Background(), "tiny", offset)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range res.Items {
				if string(it) != "0" {
					t.Fatalf("message %d is %q, want 0", read, it)
				}
				read++
			}
			offset, done = res.Next, res.UpToDate
		}
	})
	if read != tinyCount {
		t.Errorf("read %d messages back, want %d", read, tinyCount)
	}
	t.Logf("%d bytes allocated, %.1f times the body", got, float64(got)/float64(len(body)))
	if got > 50*uint64(len(body)) {
		t.Errorf("a read of %d bytes (%d messages) allocated %d bytes: %.0f times its size, want at most 50",
			len(body), tinyCount, got, float64(got)/float64(len(body)))
	}
}

// TestJSONMessagesWithCommasAndBrackets: messages are told apart by the
// commas between them, never one in a string, an array or an object, and
// pieces of an append (here of 8 bytes at most) hold whole messages.
func TestJSONMessagesWithCommasAndBrackets(t *testing.T) {
	e := newEnv(t, streams.Options{ChunkBytes: 8})
	e.create(streams.CreateRequest{Path: "j", ContentType: "application/json"})
	body := ` [ "a,b" , "c\"],d\\" ,{"x":[1,",",{"]":"}"}]}, [],{} ,"\\",-0.5e3,null ] `
	want := []string{`"a,b"`, `"c\"],d\\"`, `{"x":[1,",",{"]":"}"}]}`, `[]`, `{}`, `"\\"`, `-0.5e3`, `null`}
	if _, err := e.svc.Append(context.Background(), streams.AppendRequest{Path: "j", ContentType: "application/json", Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for offset, done := "-1", false; !done; {
		res, err := e.svc.Read(context.Background(), "j", offset)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range res.Items {
			got = append(got, string(it))
		}
		offset, done = res.Next, res.UpToDate
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("read\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
