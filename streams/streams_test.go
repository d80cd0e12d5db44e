package streams_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherhq/tether/hub"
	"github.com/tetherhq/tether/streams"
)

func TestCreateAppendRead(t *testing.T) {
	e := newEnv(t, streams.Options{})
	ctx := ctxT(t)
	res := e.create(streams.CreateRequest{Path: "a/b", ContentType: "text/plain", Body: []byte("first")})
	if !res.Created || res.Info.ContentType != "text/plain" || res.Info.Tail == streams.ZeroOffset {
		t.Fatalf("create: %+v", res)
	}
	afterFirst := res.Info.Tail
	// The same create again confirms; another configuration conflicts.
	if again := e.create(streams.CreateRequest{Path: "a/b", ContentType: "TEXT/PLAIN"}); again.Created {
		t.Fatal("a second create created")
	}
	_, err := e.svc.Create(ctx, streams.CreateRequest{Path: "a/b", ContentType: "application/json"})
	wantCode(t, err, streams.CodeConflict)

	offsets := []string{afterFirst}
	for i := range 5 {
		r := e.append("a/b", "text/plain", fmt.Sprintf("-%d", i))
		if r.Tail <= offsets[len(offsets)-1] {
			t.Fatalf("offset %s does not sort after %s", r.Tail, offsets[len(offsets)-1])
		}
		offsets = append(offsets, r.Tail)
	}
	if got, res := e.text("a/b", "-1"); got != "first-0-1-2-3-4" || res.Next != offsets[5] {
		t.Fatalf("read: %q next %s", got, res.Next)
	}
	if got, _ := e.text("a/b", afterFirst); got != "-0-1-2-3-4" {
		t.Fatalf("read from the first offset: %q", got)
	}
	if got, _ := e.text("a/b", offsets[3]); got != "-3-4" {
		t.Fatalf("read from the fourth offset: %q", got)
	}
	now, err := e.svc.Read(ctx, "a/b", streams.OffsetNow)
	if err != nil || len(now.Items) != 0 || now.Next != offsets[5] || !now.UpToDate {
		t.Fatalf("read now: %+v, %v", now, err)
	}

	// An empty stream's tail is the zero offset, never -1.
	e.create(streams.CreateRequest{Path: "empty"})
	in, err := e.svc.Head(ctx, "empty")
	if err != nil || in.Tail != streams.ZeroOffset || in.ContentType != streams.DefaultContentType {
		t.Fatalf("head of an empty stream: %+v, %v", in, err)
	}

	// Refusals.
	_, err = e.svc.Append(ctx, streams.AppendRequest{Path: "nope", ContentType: "text/plain", Body: []byte("x")})
	wantCode(t, err, streams.CodeNotFound)
	_, err = e.svc.Append(ctx, streams.AppendRequest{Path: "a/b", ContentType: "text/plain"})
	wantCode(t, err, streams.CodeBadRequest)
	_, err = e.svc.Append(ctx, streams.AppendRequest{Path: "a/b", Body: []byte("x")})
	wantCode(t, err, streams.CodeBadRequest)
	_, err = e.svc.Append(ctx, streams.AppendRequest{Path: "a/b", ContentType: "application/json", Body: []byte("{}")})
	wantCode(t, err, streams.CodeConflict)
	for _, bad := range []string{"x", "0,1", "1_", "_1", "../1", "1_2 ", strings.Repeat("1", 300) + "_1"} {
		_, err = e.svc.Read(ctx, "a/b", bad)
		wantCode(t, err, streams.CodeBadRequest)
	}
	// Well-formed offsets that name no position of this stream.
	_, err = e.svc.Read(ctx, "a/b", "0000000001_0000000000000001")
	wantCode(t, err, streams.CodeGone)
	_, err = e.svc.Read(ctx, "a/b", "9999999999999999_9999999999999999")
	wantCode(t, err, streams.CodeBadRequest)
	in2, _ := e.svc.Head(ctx, "empty")
	_, err = e.svc.Read(ctx, "a/b", in2.Tail) // the zero offset is the start of every stream
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.Create(ctx, streams.CreateRequest{Path: "__ds/x"})
	wantCode(t, err, streams.CodeNotFound)
	_, err = e.svc.Create(ctx, streams.CreateRequest{Path: "a/../b"})
	wantCode(t, err, streams.CodeBadRequest)
}

// TestLargeAppendIsChunked: an append over ChunkBytes is stored as
// several events, and read whole: a page (ReadBytes) ends at the last
// whole append within it, and an append larger than a page is one page.
func TestLargeAppendIsChunked(t *testing.T) {
	e := newEnv(t, streams.Options{ChunkBytes: 1000, ReadBytes: 2500})
	e.create(streams.CreateRequest{Path: "big", ContentType: "application/octet-stream"})
	data := make([]byte, 10_500)
	for i := range data {
		data[i] = byte(i)
	}
	var ends []string
	for _, a := range [][]byte{data, data[:1000], data[:1000], data[:1000]} {
		ends = append(ends, e.append("big", "application/octet-stream", string(a)).Tail)
	}
	if recs, err := e.st.ReadEvents(ctxT(t), "ds:big", "", 100); err != nil || len(recs) != 14 {
		t.Fatalf("%d events stored: %v", len(recs), err)
	}
	var got []byte
	var pages []string
	for off := "-1"; ; {
		res, err := e.svc.Read(ctxT(t), "big", off)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range res.Items {
			got = append(got, it...)
		}
		off = res.Next
		pages = append(pages, off)
		if res.UpToDate {
			break
		}
	}
	want := string(data) + string(data[:1000]) + string(data[:1000]) + string(data[:1000])
	if string(got) != want || strings.Join(pages, " ") != strings.Join([]string{ends[0], ends[2], ends[3]}, " ") {
		t.Fatalf("read %d bytes in pages ending at %v; want %d in pages ending at %v", len(got), pages, len(want), ends)
	}
}

func TestJSONMode(t *testing.T) {
	e := newEnv(t, streams.Options{})
	ctx := ctxT(t)
	e.create(streams.CreateRequest{Path: "j", ContentType: "application/json; charset=utf-8", Body: []byte(`[]`)})
	e.append("j", "application/json", `{"a": 1}`)
	e.append("j", "application/json", `[{"b":2}, [3, 4]]`)
	e.append("j", "application/json", `[[[5]]]`)
	res, err := e.svc.Read(ctx, "j", "-1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range res.Items {
		got = append(got, string(it))
	}
	if want := `{"a":1}|{"b":2}|[3,4]|[[5]]`; strings.Join(got, "|") != want || !res.JSON {
		t.Fatalf("messages %s, want %s", strings.Join(got, "|"), want)
	}
	for _, bad := range []string{`[]`, `{ invalid }`, `[1,`} {
		_, err = e.svc.Append(ctx, streams.AppendRequest{Path: "j", ContentType: "application/json", Body: []byte(bad)})
		wantCode(t, err, streams.CodeBadRequest)
	}
}

func TestStreamSeq(t *testing.T) {
	e := newEnv(t, streams.Options{})
	ctx := ctxT(t)
	e.create(streams.CreateRequest{Path: "s", ContentType: "text/plain"})
	app := func(seq string) error {
		_, err := e.svc.Append(ctx, streams.AppendRequest{Path: "s", ContentType: "text/plain", Body: []byte(seq), Seq: seq})
		return err
	}
	for _, seq := range []string{"09", "10", "a"} {
		if err := app(seq); err != nil {
			t.Fatalf("seq %s: %v", seq, err)
		}
	}
	for _, seq := range []string{"a", "B", "2"} {
		wantCode(t, app(seq), streams.CodeConflict)
	}
	// The last Stream-Seq survives a restart.
	e.reopen()
	wantCode(t, app("a"), streams.CodeConflict)
	if err := app("b"); err != nil {
		t.Fatal(err)
	}
}

func TestProducers(t *testing.T) {
	e := newEnv(t, streams.Options{})
	ctx := ctxT(t)
	e.create(streams.CreateRequest{Path: "p", ContentType: "text/plain"})
	app := func(id string, epoch, seq int64, body string) (*streams.AppendResult, error) {
		return e.svc.Append(ctx, streams.AppendRequest{Path: "p", ContentType: "text/plain", Body: []byte(body),
			Producer: &streams.Producer{ID: id, Epoch: epoch, Seq: seq}})
	}
	for i := range 3 {
		if r, err := app("A", 0, int64(i), fmt.Sprint(i)); err != nil || r.Duplicate || r.Producer.Seq != int64(i) {
			t.Fatalf("append %d: %+v, %v", i, r, err)
		}
	}
	r, err := app("A", 0, 1, "dup")
	if err != nil || !r.Duplicate || r.Producer.Seq != 2 {
		t.Fatalf("duplicate: %+v, %v (want the highest seq, 2)", r, err)
	}
	_, err = app("A", 0, 4, "gap")
	wantCode(t, err, streams.CodeConflict)
	var se *streams.Error
	if !asError(err, &se) || se.Producer == nil || se.Producer.ExpectedSeq != 3 || se.Producer.ReceivedSeq != 4 {
		t.Fatalf("gap: %+v", err)
	}
	_, err = app("A", 1, 5, "bad epoch")
	wantCode(t, err, streams.CodeBadRequest)
	if _, err := app("A", 1, 0, "e1"); err != nil {
		t.Fatal(err)
	}
	_, err = app("A", 0, 3, "zombie")
	wantCode(t, err, streams.CodeForbidden)
	if !asError(err, &se) || se.Producer.Epoch != 1 {
		t.Fatalf("stale epoch: %+v", err)
	}
	_, err = app("B", 0, 1, "new producer, not at 0")
	wantCode(t, err, streams.CodeConflict)

	// Producer state is committed with the data: a restart keeps it.
	e.reopen()
	if r, err := app("A", 1, 0, "retry"); err != nil || !r.Duplicate {
		t.Fatalf("retry after a restart: %+v, %v", r, err)
	}
	if got, _ := e.text("p", "-1"); got != "012e1" {
		t.Fatalf("stream: %q", got)
	}
}

func TestClose(t *testing.T) {
	e := newEnv(t, streams.Options{})
	ctx := ctxT(t)
	e.create(streams.CreateRequest{Path: "c", ContentType: "text/plain", Body: []byte("a")})
	f, err := e.svc.Follow(ctx, "c", streams.OffsetNow)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := e.svc.Append(ctx, streams.AppendRequest{Path: "c", ContentType: "text/plain", Body: []byte("b"), Close: true})
	if err != nil || !r.Closed {
		t.Fatalf("append and close: %+v, %v", r, err)
	}
	// A live reader gets the last data and the close together.
	b, err := f.Next(ctx)
	if err != nil || !b.Closed || len(b.Items) != 1 || string(b.Items[0]) != "b" || b.Next != r.Tail {
		t.Fatalf("follower: %+v, %v", b, err)
	}
	_, err = e.svc.Append(ctx, streams.AppendRequest{Path: "c", ContentType: "text/plain", Body: []byte("x")})
	wantCode(t, err, streams.CodeConflict)
	var se *streams.Error
	if !asError(err, &se) || !se.Closed || se.Tail != r.Tail {
		t.Fatalf("append to a closed stream: %+v", err)
	}
	// Closing again without data is idempotent.
	if r2, err := e.svc.Append(ctx, streams.AppendRequest{Path: "c", Close: true}); err != nil || r2.Tail != r.Tail {
		t.Fatalf("close again: %+v, %v", r2, err)
	}
	got, res := e.text("c", "-1")
	if got != "ab" || !res.Closed || res.Next != r.Tail {
		t.Fatalf("read: %q %+v", got, res)
	}
	if res, _ := e.svc.Read(ctx, "c", r.Tail); !res.Closed || len(res.Items) != 0 {
		t.Fatalf("read at the tail: %+v", res)
	}
	e.reopen()
	if in, err := e.svc.Head(ctx, "c"); err != nil || !in.Closed {
		t.Fatalf("after a restart: %+v, %v", in, err)
	}
}

func TestFollowHandover(t *testing.T) {
	e := newEnv(t, streams.Options{})
	ctx := ctxT(t)
	e.create(streams.CreateRequest{Path: "f", ContentType: "application/json"})
	const writers, each = 4, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				e.append("f", "application/json", fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))
			}
		}()
	}
	// Readers start at different moments and each must see every message
	// once: catch up with Read, then follow from its tail.
	var readers sync.WaitGroup
	for range 5 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			seen := map[string]bool{}
			res, err := e.svc.Read(ctx, "f", "-1")
			for err == nil && !res.UpToDate {
				for _, it := range res.Items {
					seen[string(it)] = true
				}
				res, err = e.svc.Read(ctx, "f", res.Next)
			}
			if err != nil {
				t.Error(err)
				return
			}
			for _, it := range res.Items {
				seen[string(it)] = true
			}
			f, err := e.svc.Follow(ctx, "f", res.Next)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			for len(seen) < writers*each {
				b, err := f.Next(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				for _, it := range b.Items {
					if seen[string(it)] {
						t.Errorf("message %s twice", it)
					}
					seen[string(it)] = true
				}
			}
		}()
	}
	wg.Wait()
	readers.Wait()
	// Deleting the stream ends its followers.
	f, err := e.svc.Follow(ctx, "f", streams.OffsetNow)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := e.svc.Delete(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	_, err = f.Next(ctx)
	wantCode(t, err, streams.CodeNotFound)
}

func TestExpiry(t *testing.T) {
	e := newEnv(t, streams.Options{})
	ctx := ctxT(t)
	ttl := int64(10)
	e.create(streams.CreateRequest{Path: "ttl", TTL: &ttl})
	exp := e.clock.Now().Add(15 * time.Second)
	e.create(streams.CreateRequest{Path: "exp", ExpiresAt: &exp})

	e.clock.Add(8 * time.Second)
	if _, err := e.svc.Read(ctx, "ttl", streams.OffsetNow); err != nil { // a read extends the TTL…
		t.Fatal(err)
	}
	if _, err := e.svc.Read(ctx, "exp", "-1"); err != nil { // …not an Expires-At
		t.Fatal(err)
	}
	e.clock.Add(8 * time.Second)
	if _, err := e.svc.Head(ctx, "ttl"); err != nil {
		t.Fatalf("the TTL was not extended by the read: %v", err)
	}
	_, err := e.svc.Head(ctx, "exp")
	wantCode(t, err, streams.CodeNotFound)
	e.clock.Add(5 * time.Second) // a HEAD does not extend it
	_, err = e.svc.Head(ctx, "ttl")
	wantCode(t, err, streams.CodeNotFound)
	// The path can be used again.
	if res := e.create(streams.CreateRequest{Path: "ttl", ContentType: "application/json"}); !res.Created {
		t.Fatal("not created again")
	}

	// The sweeper removes expired streams from the store.
	e.create(streams.CreateRequest{Path: "swept", TTL: &ttl})
	e.clock.Add(11 * time.Second)
	e.svc.Sweep(ctx)
	if _, err := e.st.Thread(ctx, "ds:swept"); err == nil {
		t.Fatal("the sweeper left an expired stream in the store")
	}
}

func asError(err error, target **streams.Error) bool {
	se, ok := err.(*streams.Error)
	if ok {
		*target = se
	}
	return ok
}

// TestFollowerBehindIsNotUpToDate: a follower that fell behind catches up
// from the log a page at a time, and its batches say there is more
// (Batch.More) until the last: a long poll or an SSE read marked every
// batch up to date, so a client took the first page of a catch-up for
// the tail.
func TestFollowerBehindIsNotUpToDate(t *testing.T) {
	e := newEnvHub(t, streams.Options{}, hub.Options{RingSize: 4, BufferEvents: 4, HistoryPage: 8})
	ctx := ctxT(t)
	e.create(streams.CreateRequest{Path: "b", ContentType: "text/plain"})
	f, err := e.svc.Follow(ctx, "b", streams.OffsetNow)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var want string
	for i := range 43 { // the last page of 8 is short: the follower knows it is at the tail
		c := string(rune('a' + i%26))
		want += c
		e.append("b", "text/plain", c)
	}
	var got string
	for batches := 0; len(got) < len(want); batches++ {
		b, err := f.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range b.Items {
			got += string(it)
		}
		if last := len(got) == len(want); b.More == last {
			t.Fatalf("batch %d ends at %d of %d characters: More %v", batches, len(got), len(want), b.More)
		}
	}
	if got != want {
		t.Fatalf("followed %q, want %q", got, want)
	}
}
