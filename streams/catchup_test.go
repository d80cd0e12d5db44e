package streams_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/streams"
)

// catchUp reads a whole CatchUp, checking that Each delivers what it
// announced.
func (e *env) catchUp(path, offset string) (*streams.CatchUp, [][]byte) {
	e.t.Helper()
	cu, err := e.svc.CatchUp(ctxT(e.t), path, offset)
	if err != nil {
		e.t.Fatalf("catch up %s from %s: %v", path, offset, err)
	}
	var items [][]byte
	var n int64
	err = cu.Each(ctxT(e.t), func(page [][]byte) error {
		for _, it := range page {
			items = append(items, bytes.Clone(it))
			n += int64(len(it))
		}
		return nil
	})
	if err != nil {
		e.t.Fatalf("catch up %s from %s: %v", path, offset, err)
	}
	if len(items) != cu.Chunks || n != cu.Bytes {
		e.t.Fatalf("catch up %s from %s: %d chunks of %d bytes, announced %d of %d", path, offset, len(items), n, cu.Chunks, cu.Bytes)
	}
	for _, it := range items {
		if len(it) == 0 {
			e.t.Fatalf("catch up %s from %s: an empty chunk", path, offset)
		}
	}
	return cu, items
}

// TestCatchUpReadsToTheTail: one catch-up reaches the tail from every
// position, through forks' inherited segments, though it holds only about
// ReadBytes in memory at a time (here one byte: every read keeps its
// first event and reads the rest again, from every position, so the
// switch falls at every boundary between segments).
func TestCatchUpReadsToTheTail(t *testing.T) {
	e := newEnv(t, streams.Options{ReadBytes: 1, ChunkBytes: 4})
	e.create(streams.CreateRequest{Path: "l0", ContentType: "text/plain", Body: []byte("AAAA")})
	e.append("l0", "text/plain", "BBBBBBBBBB") // three chunks
	e.create(streams.CreateRequest{Path: "l1", ForkedFrom: "l0"})
	e.append("l0", "text/plain", "0") // not seen by the fork
	e.append("l1", "text/plain", "CC")
	e.create(streams.CreateRequest{Path: "l2", ForkedFrom: "l1"})
	e.append("l2", "text/plain", "DDD")
	e.append("l2", "text/plain", "EEEEE")
	whole := "AAAABBBBBBBBBBCCDDDEEEEE"

	// Every position of l2, each piece of a large append's included: what
	// each log holds of it.
	positions := []string{"-1"}
	for _, sg := range []struct {
		log string
		n   int
	}{{"ds:l0", 4}, {"ds:l1", 1}, {"ds:l2", 3}} {
		recs, err := e.st.ReadEvents(ctxT(t), sg.log, "", sg.n)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			positions = append(positions, string(r.Offset))
		}
	}
	if len(positions) != 9 {
		t.Fatalf("%d positions: %v", len(positions), positions)
	}
	for i, off := range positions {
		want, _ := e.text("l2", off)
		cu, items := e.catchUp("l2", off)
		if got := string(bytes.Join(items, nil)); got != want || !cu.UpToDate || cu.Closed || cu.Next != positions[len(positions)-1] {
			t.Fatalf("from position %d: %q (up to date %v, next %s), want %q", i, got, cu.UpToDate, cu.Next, want)
		}
		if i == 0 && want != whole {
			t.Fatalf("whole stream %q", want)
		}
	}

	// A closed stream: the read that reaches its end says so.
	e.create(streams.CreateRequest{Path: "c", ContentType: "text/plain", Body: []byte("xyz")})
	if _, err := e.svc.Append(ctxT(t), streams.AppendRequest{Path: "c", ContentType: "text/plain", Body: []byte("123"), Close: true}); err != nil {
		t.Fatal(err)
	}
	if cu, items := e.catchUp("c", "-1"); !cu.Closed || !cu.UpToDate || string(bytes.Join(items, nil)) != "xyz123" {
		t.Fatalf("closed stream: %+v %q", cu, items)
	}
	if cu, items := e.catchUp("c", streams.OffsetNow); !cu.Closed || !cu.UpToDate || len(items) != 0 || cu.Next != cu.Tail {
		t.Fatalf("closed stream from now: %+v", cu)
	}
}

// TestCatchUpThreadLog: a thread log is read whole, its events as JSON
// messages.
func TestCatchUpThreadLog(t *testing.T) {
	e := newEnv(t, streams.Options{ReadBytes: 1000})
	ctx := ctxT(t)
	now := tether.Now()
	var evs []*tether.Event
	var enc [][]byte
	for i := range 200 {
		ev := &tether.Event{Type: tether.EventCustom, TS: now, RunID: "run_1", Name: "n", Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
		b, _ := ev.Encode()
		evs, enc = append(evs, ev), append(enc, b)
	}
	if _, err := e.st.Commit(ctx, &store.Batch{ThreadID: "t1", Create: true, Events: evs, Encoded: enc,
		Thread: &tether.Thread{ID: "t1", Status: tether.ThreadIdle, CreatedAt: now, UpdatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	cu, items := e.catchUp("threads/t1", "-1")
	if !cu.JSON || !cu.UpToDate || len(items) != 200 || cu.Bytes < 10_000 {
		t.Fatalf("thread log: %d items, %d bytes, up to date %v", len(items), cu.Bytes, cu.UpToDate)
	}
	for i, it := range items {
		var ev tether.Event
		if err := json.Unmarshal(it, &ev); err != nil || string(ev.Data) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Fatalf("event %d: %s", i, it)
		}
		if i == len(items)-1 && string(ev.Offset) != cu.Next {
			t.Fatalf("next %s, last event %s", cu.Next, ev.Offset)
		}
	}
}

// TestCatchUpBound: past CatchUpBytes a catch-up ends at the last whole
// append within the bound, not up to date, and reading on from its end
// gives the rest, each byte once.
func TestCatchUpBound(t *testing.T) {
	e := newEnv(t, streams.Options{ReadBytes: 700, CatchUpBytes: 2500})
	e.create(streams.CreateRequest{Path: "b", ContentType: "text/plain"})
	var want strings.Builder
	var tails []string
	for i := range 10 {
		s := strings.Repeat(string(rune('a'+i)), 600)
		want.WriteString(s)
		tails = append(tails, e.append("b", "text/plain", s).Tail)
	}
	if _, err := e.svc.Append(ctxT(t), streams.AppendRequest{Path: "b", Close: true}); err != nil {
		t.Fatal(err)
	}
	var got []byte
	var ends []string
	off := "-1"
	for range 10 {
		cu, items := e.catchUp("b", off)
		for _, it := range items {
			got = append(got, it...)
		}
		ends = append(ends, cu.Next)
		if cu.UpToDate {
			if !cu.Closed {
				t.Fatal("the last read does not say closed")
			}
			break
		}
		if cu.Closed || cu.Bytes > 2500 {
			t.Fatalf("a bounded read: %d bytes, closed %v", cu.Bytes, cu.Closed)
		}
		off = cu.Next
	}
	// Four appends (2,400 bytes) fit in 2,500: reads end at the 4th and 8th.
	if string(got) != want.String() || len(ends) != 3 || ends[0] != tails[3] || ends[1] != tails[7] {
		t.Fatalf("read %d of %d bytes, ending at %v (appends end at %v)", len(got), want.Len(), ends, tails)
	}

	// One event is always returned, even over the bound.
	e2 := newEnv(t, streams.Options{CatchUpBytes: 100})
	e2.create(streams.CreateRequest{Path: "x", ContentType: "text/plain", Body: []byte(strings.Repeat("x", 300))})
	e2.append("x", "text/plain", "y")
	cu, items := e2.catchUp("x", "-1")
	if len(items) != 1 || len(items[0]) != 300 || cu.UpToDate {
		t.Fatalf("over the bound: %+v", cu)
	}
	if cu, items = e2.catchUp("x", cu.Next); string(bytes.Join(items, nil)) != "y" || !cu.UpToDate {
		t.Fatalf("after it: %q", items)
	}
}

// TestCatchUpStreamDeletedMidway: if the stream is deleted between the
// decision of a read's end and its data, Each fails rather than deliver a
// part of what was announced as the whole.
func TestCatchUpStreamDeletedMidway(t *testing.T) {
	e := newEnv(t, streams.Options{ReadBytes: 10})
	e.create(streams.CreateRequest{Path: "d", ContentType: "text/plain"})
	for range 5 {
		e.append("d", "text/plain", "0123456789")
	}
	cu, err := e.svc.CatchUp(ctxT(t), "d", "-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Delete(ctxT(t), "d"); err != nil {
		t.Fatal(err)
	}
	var n int64
	err = cu.Each(ctxT(t), func(items [][]byte) error {
		for _, it := range items {
			n += int64(len(it))
		}
		return nil
	})
	if err == nil || n >= cu.Bytes {
		t.Fatalf("each after a delete: %d of %d bytes, err %v", n, cu.Bytes, err)
	}
	// Created again with as much data: the offsets are not the old ones.
	e.create(streams.CreateRequest{Path: "d", ContentType: "text/plain"})
	for range 5 {
		e.append("d", "text/plain", "abcdefghij")
	}
	cu2, err := e.svc.CatchUp(ctxT(t), "d", "-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Delete(ctxT(t), "d"); err != nil {
		t.Fatal(err)
	}
	e.create(streams.CreateRequest{Path: "d", ContentType: "text/plain"})
	for range 5 {
		e.append("d", "text/plain", "ABCDEFGHIJ")
	}
	if err := cu2.Each(ctxT(t), func([][]byte) error { return nil }); err == nil {
		t.Fatal("each over a stream created again succeeded")
	}
}

// TestCatchUpBoundAtWholeAppends: past CatchUpBytes (10 here) a catch-up
// ends at the end of an append, never between the pieces (ChunkBytes, 4)
// of a large one, which it returns whole even over the bound; from a
// position inside an append (every piece's is a position) it ends at that
// append's end at the earliest. Whatever it kept in memory
// (ReadBytes 1: the first piece; 1,000: all) and read again, Each
// delivers what it announced. Byte and JSON streams alike.
func TestCatchUpBoundAtWholeAppends(t *testing.T) {
	for _, tc := range []struct {
		ct      string
		appends []string
	}{
		{"text/plain", []string{"0123", "€€€€", "xy", "ab", "cdefghijklmnop", "q"}},
		{"application/json", []string{`"a"`, `["bb","cc","dd","ee"]`, `[1,2]`, `3`, `["ffff","gggg","hhhh"]`}},
	} {
		for _, rb := range []int{1, 1000} {
			e := newEnv(t, streams.Options{ReadBytes: rb, ChunkBytes: 4, CatchUpBytes: 10})
			e.create(streams.CreateRequest{Path: "s", ContentType: tc.ct})
			ends := map[string]bool{}
			for _, a := range tc.appends {
				ends[e.append("s", tc.ct, a).Tail] = true
			}
			positions := []string{"-1"} // and every piece's
			recs, err := e.st.ReadEvents(ctxT(t), "ds:s", "", 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				positions = append(positions, string(r.Offset))
			}
			for _, from := range positions {
				var got [][]byte
				off := from
				for n := 0; ; n++ {
					cu, items := e.catchUp("s", off)
					got = append(got, items...)
					if !ends[cu.Next] {
						t.Fatalf("%s (ReadBytes %d) from %s: answer %d ends at %s, not at the end of an append", tc.ct, rb, from, n, cu.Next)
					}
					if cu.UpToDate {
						break
					}
					off = cu.Next
				}
				sep := []byte(nil)
				if tc.ct == "application/json" {
					sep = []byte(",") // chunks and messages alike are joined by commas
				}
				var want [][]byte
				for off := from; ; {
					r, err := e.svc.Read(ctxT(t), "s", off)
					if err != nil {
						t.Fatal(err)
					}
					want = append(want, r.Items...)
					if r.UpToDate {
						break
					}
					off = r.Next
				}
				if g, w := bytes.Join(got, sep), bytes.Join(want, sep); !bytes.Equal(g, w) {
					t.Fatalf("%s (ReadBytes %d) from %s: %q, want %q", tc.ct, rb, from, g, w)
				}
			}
		}
	}
}
