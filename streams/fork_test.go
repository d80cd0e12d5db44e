package streams_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
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
