package engine_test

import (
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
		recs, err := e.ReadLog(ctx, "t1", from, 2)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, recs...)
		if len(recs) < 2 {
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
	if _, err := e.ReadLog(ctx, "nope", tether.OffsetStart, 2); tether.CodeOf(err) != tether.CodeNotFound {
		t.Fatalf("unknown thread: %v", err)
	}
	if _, err := e.ReadLog(ctx, "a/b", tether.OffsetStart, 2); tether.CodeOf(err) != tether.CodeNotFound {
		t.Fatalf("invalid thread id: %v", err)
	}
	if _, err := e.ReadLog(ctx, "t1", "0000000001_0000000000000001", 2); tether.CodeOf(err) != tether.CodeBadRequest {
		t.Fatalf("offset not in the log: %v", err)
	}
}
