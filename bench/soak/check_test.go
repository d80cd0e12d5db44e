package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The soak is only as good as its checks: each must see the breach it is
// there for.

func TestCompareSeq(t *testing.T) {
	log := []entry{{offset: "1", hash: 1}, {offset: "2", hash: 2}, {offset: "3", hash: 3}}
	seq := func(offs ...string) []seen {
		var out []seen
		for _, o := range offs {
			h := uint64(o[0] - '0')
			if strings.HasSuffix(o, "!") {
				o, h = o[:len(o)-1], 99
			}
			out = append(out, seen{offset: o, hash: h})
		}
		return out
	}
	for _, c := range []struct {
		got   []seen
		whole bool
		want  string
	}{
		{seq("1", "2", "3"), true, ""},
		{seq("1", "2"), false, ""},
		{seq("1", "2"), true, "received 2 events, the log has 3"},
		{seq("1", "3"), false, "a gap"},
		{seq("1", "1", "2"), false, "a duplicate or a reorder"},
		{seq("2", "1"), false, "a gap"},
		{seq("1", "2!"), false, "differs from the log's"},
	} {
		got := compareSeq(c.got, log, c.whole)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("compareSeq(%v) = %q, want %q", c.got, got, c.want)
		}
	}
}

func TestCheckFindsBreaches(t *testing.T) {
	ev := func(off, typ, run, extra string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"offset":"%s","type":"%s","run_id":"%s"%s}`, off, typ, run, extra))
	}
	o := func(n int) string { return fmt.Sprintf("0000000002_%016d", n) }
	raws := []json.RawMessage{
		ev(o(1), "run.created", "r1", `,"run":{"id":"r1"}`),
		ev(o(2), "run.started", "r1", ""),
		ev(o(3), "message.started", "r1", `,"message_id":"m1"`),
		ev(o(4), "text.delta", "r1", `,"message_id":"m1","delta":"a"`),
		ev(o(5), "text.delta", "r1", `,"message_id":"m1","delta":"b"`),
		ev(o(6), "text.delta", "r1", `,"message_id":"m1","delta":"a"`), // twice
		ev(o(7), "run.finished", "r1", `,"status":"done"`),
		ev(o(8), "custom", "r1", ""), // after the end
	}
	tl := &threadLog{keyPos: map[string][]int{}}
	if bad := tl.add("t", raws); len(bad) != 0 {
		t.Fatal(bad)
	}
	w := newWorld(nil)
	w.threads = []string{"t"}
	c := newChecker(w, "", &options{stuckAfter: time.Minute})
	c.logs["t"] = tl
	c.epoch = 2
	snap := &snapshot{
		acks: []*ack{
			{thread: "t", run: "r1", keys: []string{"d:b"}, next: o(4)},          // wrong offset
			{thread: "t", run: "r1", keys: []string{"d:a"}},                      // in the log twice
			{thread: "t", run: "r1", keys: []string{"d:zz"}},                     // missing
			{thread: "t", run: "r1", keys: []string{"ms:m1", "d:b"}, next: o(5)}, // not contiguous
		},
		runs: []runInfo{{id: "r1", thread: "t", kind: kindExt, created: time.Now()}, {id: "r2", thread: "t", kind: kindDemo, created: time.Now()}},
	}
	bad := strings.Join(c.check(false, snap), "\n")
	for _, want := range []string{
		"answered next_offset " + o(4) + ", its last event is at " + o(5),
		"d:a is in the log 2 times",
		"(d:zz) is not in the log",
		"not right after",
		"custom at " + o(8) + " after its run.finished",
		"run r2: acknowledged, and its run.created is in the log of t 0 times",
	} {
		if !strings.Contains(bad, want) {
			t.Errorf("no violation %q in:\n%s", want, bad)
		}
	}
}
