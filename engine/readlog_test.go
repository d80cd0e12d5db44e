package engine_test

import (
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
)

// ReadLog pages through a thread's log from the store, in order, each
// event once; an unknown thread is not_found and an offset not in its log
// bad_request, in the codes a client may see.
func TestReadLog(t *testing.T) {
	e, _ := setup(t)
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	mustRun(t, e, "t1", engine.RunRequest{Agent: "demo", Input: userInput("hi")})
	c := mustClaim(t, e, "demo")
	mustAppend(t, e, c, answer("m1", "a", "b", "c", "d")...)
	var all []*tether.Record
	for from := tether.OffsetStart; ; {
		recs, more, err := e.ReadLog(ctx, "t1", from, 2)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, recs...)
		if !more {
			break
		}
		from = recs[len(recs)-1].Offset
	}
	snap, err := e.Thread(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(all); i++ {
		if !all[i].Offset.After(all[i-1].Offset) {
			t.Fatalf("record %d (%s) not after %s", i, all[i].Offset, all[i-1].Offset)
		}
	}
	if len(all) == 0 || all[len(all)-1].Offset != snap.Offset {
		t.Fatalf("read %d records, not up to the tail %s", len(all), snap.Offset)
	}
	if _, _, err := e.ReadLog(ctx, "nope", tether.OffsetStart, 2); tether.CodeOf(err) != tether.CodeNotFound {
		t.Fatalf("unknown thread: %v", err)
	}
	if _, _, err := e.ReadLog(ctx, "a/b", tether.OffsetStart, 2); tether.CodeOf(err) != tether.CodeNotFound {
		t.Fatalf("invalid thread id: %v", err)
	}
	if _, _, err := e.ReadLog(ctx, "t1", "0000000001_0000000000000001", 2); tether.CodeOf(err) != tether.CodeBadRequest {
		t.Fatalf("offset not in the log: %v", err)
	}
}

// A page of ReadLog holds about a megabyte at most, whatever the events'
// size (one larger event comes whole), and says whether the log goes on:
// a resume that folds a log of large events (up to --max-event each) held
// a page of 512 of them, hundreds of megabytes, while it folded.
func TestReadLogBoundedInBytes(t *testing.T) {
	e, _ := setup(t)
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	mustRun(t, e, "t1", engine.RunRequest{Agent: "demo", Input: userInput("hi")})
	c := mustClaim(t, e, "demo")
	mustAppend(t, e, c, &tether.Event{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant})
	big := strings.Repeat("x", 300<<10)
	for range 12 {
		mustAppend(t, e, c, &tether.Event{Type: tether.EventTextDelta, MessageID: "m1", Delta: big})
	}
	snap, err := e.Thread(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	var all []*tether.Record
	for from := tether.OffsetStart; ; {
		recs, more, err := e.ReadLog(ctx, "t1", from, 512)
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, r := range recs[:max(len(recs)-1, 0)] {
			size += len(r.Data)
		}
		if size > 1<<20 {
			t.Fatalf("a page of %d records holds %d bytes before its last", len(recs), size)
		}
		all = append(all, recs...)
		if !more {
			break
		}
		if len(recs) == 0 {
			t.Fatal("an empty page that says the log goes on")
		}
		from = recs[len(recs)-1].Offset
	}
	if len(all) == 0 || all[len(all)-1].Offset != snap.Offset {
		t.Fatalf("read %d records, not up to the tail %s", len(all), snap.Offset)
	}
}
