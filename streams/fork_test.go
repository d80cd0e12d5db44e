package streams_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/sqlitestore"
	"github.com/tetherhq/tether/streams"
)

func TestForks(t *testing.T) {
	e := newEnv(t, streams.Options{ReadBytes: 1})
	ctx := ctxT(t)
	e.create(streams.CreateRequest{Path: "l0", ContentType: "text/plain", Body: []byte("A")})
	mid := e.append("l0", "text/plain", "B").Tail
	e.create(streams.CreateRequest{Path: "l1", ForkedFrom: "/v1/stream/l0"}) // inherits AB
	e.append("l0", "text/plain", "0")                                        // not seen by forks
	e.append("l1", "text/plain", "C")
	e.create(streams.CreateRequest{Path: "l2", ForkedFrom: "l1"}) // inherits ABC
	e.append("l2", "text/plain", "D")
	e.create(streams.CreateRequest{Path: "mid", ForkedFrom: "l0", ForkOffset: mid, ContentType: "text/plain"})
	e.create(streams.CreateRequest{Path: "zero", ForkedFrom: "l2", ForkOffset: "0000000000000000_0000000000000000"})

	for path, want := range map[string]string{"l0": "AB0", "l1": "ABC", "l2": "ABCD", "mid": "AB", "zero": ""} {
		if got, _ := e.text(path, "-1"); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
	// Reads resume across the boundaries, from every position (ReadBytes
	// is 1: a page per event).
	var positions []string
	for off := "-1"; ; {
		r, err := e.svc.Read(ctx, "l2", off)
		if err != nil {
			t.Fatal(err)
		}
		if r.UpToDate && len(r.Items) == 0 {
			break
		}
		positions = append(positions, r.Next)
		off = r.Next
	}
	if len(positions) != 4 {
		t.Fatalf("%d positions in ABCD", len(positions))
	}
	for i, off := range positions {
		if i > 0 && off <= positions[i-1] {
			t.Fatalf("positions out of order: %v", positions)
		}
		if got, want := func() string { s, _ := e.text("l2", off); return s }(), "ABCD"[i+1:]; got != want {
			t.Errorf("from position %d: %q, want %q", i, got, want)
		}
	}

	// Content types: inherited, or they must match.
	e.create(streams.CreateRequest{Path: "js", ContentType: "application/json", Body: []byte(`[1,2,3]`)})
	if res := e.create(streams.CreateRequest{Path: "js-fork", ForkedFrom: "js", ForkOffset: streams.ZeroOffset, ForkSubOffset: 2}); res.Info.ContentType != "application/json" {
		t.Fatalf("inherited content type %s", res.Info.ContentType)
	}
	if r, _ := e.svc.Read(ctx, "js-fork", "-1"); len(r.Items) != 2 || string(r.Items[1]) != "2" {
		t.Fatalf("sub-offset fork: %q", r.Items)
	}
	_, err := e.svc.Create(ctx, streams.CreateRequest{Path: "bad-ct", ForkedFrom: "js", ContentType: "text/plain"})
	wantCode(t, err, streams.CodeConflict)
	_, err = e.svc.Create(ctx, streams.CreateRequest{Path: "bad-off", ForkedFrom: "js", ForkOffset: "9999999999999999_9999999999999999"})
	wantCode(t, err, streams.CodeBadRequest)
	_, err = e.svc.Create(ctx, streams.CreateRequest{Path: "bad-sub", ForkedFrom: "js", ForkOffset: streams.ZeroOffset, ForkSubOffset: 4})
	wantCode(t, err, streams.CodeBadRequest)
	_, err = e.svc.Create(ctx, streams.CreateRequest{Path: "no-src", ForkedFrom: "nope"})
	wantCode(t, err, streams.CodeNotFound)
	e.create(streams.CreateRequest{Path: "bin", Body: []byte("hello")})
	e.create(streams.CreateRequest{Path: "bin-fork", ForkedFrom: "bin", ForkOffset: streams.ZeroOffset, ForkSubOffset: 3, Body: []byte("XY")})
	if got, _ := e.text("bin-fork", "-1"); got != "helXY" {
		t.Fatalf("binary sub-offset fork with a body: %q", got)
	}
	e.create(streams.CreateRequest{Path: "bin-fork2", ForkedFrom: "bin-fork", ForkOffset: streams.ZeroOffset, ForkSubOffset: 2})
	if got, _ := e.text("bin-fork2", "-1"); got != "he" {
		t.Fatalf("a sub-offset fork of a sub-offset fork: %q", got)
	}
}

func TestForkDeletion(t *testing.T) {
	e := newEnv(t, streams.Options{})
	ctx := ctxT(t)
	e.create(streams.CreateRequest{Path: "l0", Body: []byte("A")})
	e.create(streams.CreateRequest{Path: "l1", ForkedFrom: "l0"})
	e.append("l1", streams.DefaultContentType, "B")
	e.create(streams.CreateRequest{Path: "l2", ForkedFrom: "l1"})

	// Deleted while forks read them: gone, and their paths are taken.
	for _, p := range []string{"l0", "l1"} {
		if err := e.svc.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
		_, err := e.svc.Head(ctx, p)
		wantCode(t, err, streams.CodeGone)
		wantCode(t, e.svc.Delete(ctx, p), streams.CodeGone)
		_, err = e.svc.Create(ctx, streams.CreateRequest{Path: p})
		wantCode(t, err, streams.CodeConflict)
		_, err = e.svc.Create(ctx, streams.CreateRequest{Path: p + "-fork", ForkedFrom: p})
		wantCode(t, err, streams.CodeConflict)
	}
	if got, _ := e.text("l2", "-1"); got != "AB" {
		t.Fatalf("the fork of deleted streams reads %q", got)
	}
	// The count of forks is rebuilt from the store after a restart.
	e.reopen()
	if got, _ := e.text("l2", "-1"); got != "AB" {
		t.Fatalf("after a restart: %q", got)
	}
	// Deleting the last fork removes the chain.
	if err := e.svc.Delete(ctx, "l2"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"l0", "l1", "l2"} {
		_, err := e.svc.Head(ctx, p)
		wantCode(t, err, streams.CodeNotFound)
		if _, err := e.st.Thread(ctx, "ds:"+p); err == nil {
			t.Fatalf("%s is still in the store", p)
		}
	}
	// A source with no forks left is deleted at once.
	e.create(streams.CreateRequest{Path: "s", Body: []byte("x")})
	e.create(streams.CreateRequest{Path: "s-fork", ForkedFrom: "s"})
	e.svc.Delete(ctx, "s-fork")
	e.svc.Delete(ctx, "s")
	_, err := e.svc.Head(ctx, "s")
	wantCode(t, err, streams.CodeNotFound)
}

func TestThreadLog(t *testing.T) {
	e := newEnv(t, streams.Options{})
	ctx := ctxT(t)
	// A thread written by the runs engine (here: straight to the store).
	now := tether.Now()
	var evs []*tether.Event
	var enc [][]byte
	for i := range 3 {
		ev := &tether.Event{Type: tether.EventCustom, TS: now, RunID: "run_1", Name: "n", Data: json.RawMessage(`{"i":` + string(rune('0'+i)) + `}`)}
		b, _ := ev.Encode()
		evs, enc = append(evs, ev), append(enc, b)
	}
	if _, err := e.st.Commit(ctx, &store.Batch{ThreadID: "t1", Create: true, Events: evs, Encoded: enc,
		Thread: &tether.Thread{ID: "t1", Status: tether.ThreadIdle, CreatedAt: now, UpdatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	res, err := e.svc.Read(ctx, "threads/t1", "-1")
	if err != nil || !res.JSON || len(res.Items) != 3 || !res.ReadOnly {
		t.Fatalf("read: %+v, %v", res, err)
	}
	var ev tether.Event
	if err := json.Unmarshal(res.Items[2], &ev); err != nil || ev.Offset != tether.Offset(res.Next) || ev.Type != tether.EventCustom {
		t.Fatalf("last event %s, next %s: %v", res.Items[2], res.Next, err)
	}
	if r, _ := e.svc.Read(ctx, "threads/t1", string(ev.Offset)); len(r.Items) != 0 || !r.UpToDate {
		t.Fatalf("read from the tail: %+v", r)
	}
	_, err = e.svc.Append(ctx, streams.AppendRequest{Path: "threads/t1", ContentType: "application/json", Body: []byte("{}")})
	wantCode(t, err, streams.CodeReadOnly)
	wantCode(t, e.svc.Delete(ctx, "threads/t1"), streams.CodeReadOnly)
	_, err = e.svc.Read(ctx, "threads/nope", "-1")
	wantCode(t, err, streams.CodeNotFound)
	_, err = e.svc.Read(ctx, "threads/a:b", "-1")
	wantCode(t, err, streams.CodeNotFound)
	// Streams stay out of thread listings.
	e.create(streams.CreateRequest{Path: "s"})
	page, err := e.st.Threads(context.Background(), store.ThreadQuery{})
	if err != nil || len(page.Threads) != 1 || page.Threads[0].ID != "t1" {
		t.Fatalf("listing: %+v, %v", page, err)
	}
	if !strings.HasPrefix(streams.Namespace, "ds") {
		t.Fatal(streams.Namespace)
	}
}

// bigBytes returns n bytes that differ from every shifted copy of
// themselves, so that a read that skips or repeats a part does not match.
func bigBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// positions returns the offsets of the events of the stream's own log.
func (e *env) positions(path string) []string {
	e.t.Helper()
	recs, err := e.st.ReadEvents(ctxT(e.t), "ds:"+path, tether.OffsetStart, 1000)
	if err != nil {
		e.t.Fatal(err)
	}
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Offset)
	}
	return out
}

// TestForkSubOffsetAcrossPieces: a sub-offset reaches across the pieces
// of an append larger than a chunk, from its start or from a position
// between its pieces, and no further than the append as the source sees
// it: a fork that inherits only the first pieces of an append ends it
// there, whatever follows in its own log.
func TestForkSubOffsetAcrossPieces(t *testing.T) {
	e := newEnv(t, streams.Options{ChunkBytes: 1000})
	ctx := ctxT(t)
	const ct = streams.DefaultContentType
	big := bigBytes(3500) // pieces of 1000, 1000, 1000 and 500 bytes
	e.create(streams.CreateRequest{Path: "s", Body: []byte("H")})
	e.append("s", ct, string(big))
	e.append("s", ct, "after")
	pos := e.positions("s") // H, the four pieces, after
	if len(pos) != 6 {
		t.Fatalf("%d events, want 6", len(pos))
	}

	for _, c := range []struct {
		at   string
		sub  int64
		want string
	}{
		{pos[0], 1, "H" + string(big[:1])},
		{pos[0], 2500, "H" + string(big[:2500])},
		{pos[0], 3500, "H" + string(big)},
		{pos[1], 2000, "H" + string(big[:3000])}, // from a position between pieces: the rest of the append
		{pos[3], 500, "H" + string(big)},
	} {
		res, err := e.svc.Create(ctx, streams.CreateRequest{Path: "f", ForkedFrom: "s", ForkOffset: c.at, ForkSubOffset: c.sub})
		if err != nil {
			t.Fatalf("fork at %s+%d: %v", c.at, c.sub, err)
		}
		if got, _ := e.text("f", "-1"); got != c.want {
			t.Errorf("fork at %s+%d: %d bytes, want %d", c.at, c.sub, len(got), len(c.want))
		}
		if res.Info.Tail <= c.at {
			t.Errorf("fork at %s+%d: tail %s", c.at, c.sub, res.Info.Tail)
		}
		if err := e.svc.Delete(ctx, "f"); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		at  string
		sub int64
	}{{pos[0], 3501}, {pos[1], 2501}, {pos[4], 6}} {
		_, err := e.svc.Create(ctx, streams.CreateRequest{Path: "f", ForkedFrom: "s", ForkOffset: c.at, ForkSubOffset: c.sub})
		wantCode(t, err, streams.CodeBadRequest)
	}

	// x inherits s up to the second piece, then has its own data; y forks
	// x inside what x inherited.
	e.create(streams.CreateRequest{Path: "x", ForkedFrom: "s", ForkOffset: pos[2]})
	e.append("x", ct, "own")
	_, err := e.svc.Create(ctx, streams.CreateRequest{Path: "y", ForkedFrom: "x", ForkOffset: pos[1], ForkSubOffset: 1001})
	wantCode(t, err, streams.CodeBadRequest)
	e.create(streams.CreateRequest{Path: "y", ForkedFrom: "x", ForkOffset: pos[1], ForkSubOffset: 1000})
	if got, _ := e.text("y", "-1"); got != "H"+string(big[:2000]) {
		t.Fatalf("fork of a fork cut inside an append: %d bytes", len(got))
	}
}

// TestForkSubOffsetUnmarkedPieces: a large append stored before its
// pieces were marked (each piece then looks like an append of its own)
// reads whole as before, and a fork's sub-offset into it reaches within
// one piece and is refused past it: never a wrong read.
func TestForkSubOffsetUnmarkedPieces(t *testing.T) {
	e := newEnv(t, streams.Options{ChunkBytes: 1000})
	ctx := ctxT(t)
	e.create(streams.CreateRequest{Path: "old"})
	e.close()
	// What an earlier build stored for one append of 2500 bytes: three
	// ds.data events without a status.
	big := bigBytes(2500)
	st, err := sqlitestore.Open(filepath.Join(e.dir, "tether.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := st.Thread(ctx, "ds:old")
	if err != nil {
		t.Fatal(err)
	}
	var evs []*tether.Event
	var enc [][]byte
	for _, piece := range [][]byte{big[:1000], big[1000:2000], big[2000:]} {
		data, _ := json.Marshal(piece)
		ev := &tether.Event{Type: streams.EventData, TS: tether.Now(), Data: data}
		b, err := ev.Encode()
		if err != nil {
			t.Fatal(err)
		}
		evs, enc = append(evs, ev), append(enc, b)
	}
	row := rec.Thread
	if _, err := st.Commit(ctx, &store.Batch{ThreadID: "ds:old", Version: rec.Version, Events: evs, Encoded: enc, Thread: &row}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	e.open()

	if got, _ := e.text("old", "-1"); got != string(big) {
		t.Fatalf("old pieces read %d bytes", len(got))
	}
	pos := e.positions("old")
	e.create(streams.CreateRequest{Path: "f1", ForkedFrom: "old", ForkOffset: streams.ZeroOffset, ForkSubOffset: 999})
	if got, _ := e.text("f1", "-1"); got != string(big[:999]) {
		t.Fatalf("fork inside the first old piece: %d bytes", len(got))
	}
	e.create(streams.CreateRequest{Path: "f2", ForkedFrom: "old", ForkOffset: pos[0], ForkSubOffset: 1000})
	if got, _ := e.text("f2", "-1"); got != string(big[:2000]) {
		t.Fatalf("fork inside the second old piece: %d bytes", len(got))
	}
	_, err = e.svc.Create(ctx, streams.CreateRequest{Path: "f3", ForkedFrom: "old", ForkOffset: streams.ZeroOffset, ForkSubOffset: 1001})
	wantCode(t, err, streams.CodeBadRequest)
}
