package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	tether "github.com/tetherhq/tether"
)

// stream writes a scripted SSE answer.
type stream struct {
	w http.ResponseWriter
}

func openStream(w http.ResponseWriter) *stream {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.WriteHeader(http.StatusOK)
	s := &stream{w}
	s.raw(":ok\n\n")
	return s
}

func (s *stream) raw(str string) {
	_, _ = s.w.Write([]byte(str))
	s.w.(http.Flusher).Flush()
}

func (s *stream) connected(heartbeatMs int) {
	s.raw(fmt.Sprintf("event: connected\ndata: {\"thread_id\":\"t1\",\"run_id\":\"r1\",\"offset\":%q,\"heartbeat_ms\":%d,\"server_time\":\"2025-01-02T03:04:05.006Z\"}\n\n", off(0), heartbeatMs))
}

func (s *stream) send(evs ...tether.Event) {
	for _, e := range evs {
		s.raw(frame(e))
	}
}

func frame(e tether.Event) string {
	b, _ := json.Marshal(e)
	return fmt.Sprintf("id: %s\nevent: %s\ndata: %s\n\n", e.Offset, e.Type, b)
}

func off(i int) tether.Offset { return tether.FormatOffset(1, uint64(i)) }

func delta(i int) tether.Event {
	return tether.Event{Offset: off(i), Type: tether.EventTextDelta, RunID: "r1", MessageID: "m1", Delta: fmt.Sprintf("w%d ", i)}
}

func finished(i int) tether.Event {
	return tether.Event{Offset: off(i), Type: tether.EventRunFinished, RunID: "r1", Status: "done"}
}

// deltas returns text.delta events from..to, inclusive.
func deltas(from, to int) []tether.Event {
	var out []tether.Event
	for i := from; i <= to; i++ {
		out = append(out, delta(i))
	}
	return out
}

// collect runs a subscription to its end (or 10 s) and returns the
// offsets of the events, the snapshots, and the errors.
func collect(t *testing.T, seq iter.Seq2[Update, error]) (offsets []tether.Offset, snaps []*tether.Snapshot, errs []error) {
	t.Helper()
	for u, err := range seq {
		switch {
		case err != nil:
			errs = append(errs, err)
		case u.Event != nil && u.Snapshot == nil:
			offsets = append(offsets, u.Event.Offset)
		case u.Snapshot != nil && u.Event == nil:
			snaps = append(snaps, u.Snapshot)
		default:
			t.Fatalf("update %+v has not exactly one of Snapshot and Event", u)
		}
	}
	return offsets, snaps, errs
}

func offsets(from, to int) []tether.Offset {
	var out []tether.Offset
	for i := from; i <= to; i++ {
		out = append(out, off(i))
	}
	return out
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func checkEvents(t *testing.T, got, want []tether.Offset, errs []error) {
	t.Helper()
	if len(errs) > 0 {
		t.Errorf("errors: %v", errs)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events\n got %v\nwant %v", got, want)
	}
}

func TestSubscribeUnevenChunks(t *testing.T) {
	c, _ := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		st := openStream(w)
		var all strings.Builder
		all.WriteString("event: connected\r\ndata: {\"heartbeat_ms\":15000}\r\n\r\n")
		for _, e := range append(deltas(1, 20), finished(21)) {
			all.WriteString(frame(e))
			all.WriteString("event: ping\ndata: {}\n\n")
		}
		b := all.String()
		for i, size := 0, 1; i < len(b); size = size%7 + 1 {
			j := min(i+size, len(b))
			st.raw(b[i:j])
			i = j
		}
	})
	got, _, errs := collect(t, c.Subscribe(testCtx(t), SubscribeRequest{RunID: "r1", After: tether.OffsetStart}))
	checkEvents(t, got, offsets(1, 21), errs)
}

// Text with characters of 2, 3 and 4 bytes, written a byte at a time so
// that every character is cut between two reads: each arrives whole.
func TestSubscribeSplitCharacters(t *testing.T) {
	text := []string{"é ", "中文 ", "😀👍🏽"}
	c, _ := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		st := openStream(w)
		st.connected(15000)
		var all strings.Builder
		for i, d := range text {
			e := delta(i + 1)
			e.Delta = d
			all.WriteString(frame(e))
		}
		all.WriteString(frame(finished(len(text) + 1)))
		b := all.String()
		for i := range len(b) {
			st.raw(b[i : i+1])
		}
	})
	var got []string
	for u, err := range c.Subscribe(testCtx(t), SubscribeRequest{RunID: "r1", After: tether.OffsetStart}) {
		if err != nil {
			t.Fatal(err)
		}
		if u.Event.Type == tether.EventTextDelta {
			got = append(got, u.Event.Delta)
		}
	}
	if !reflect.DeepEqual(got, text) {
		t.Errorf("deltas %q, want %q", got, text)
	}
}

// The connection breaks in the middle of a frame: the half frame is
// dropped and the stream resumes after the last whole event.
func TestSubscribeDropMidFrame(t *testing.T) {
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		st := openStream(w)
		st.connected(15000)
		switch n {
		case 1:
			st.send(deltas(1, 3)...)
			half := frame(delta(4))
			st.raw(half[:len(half)/2])
			panic(http.ErrAbortHandler)
		default:
			st.send(deltas(4, 6)...)
			st.send(finished(7))
		}
	})
	got, _, errs := collect(t, c.Subscribe(testCtx(t), SubscribeRequest{RunID: "r1", After: tether.OffsetStart}))
	checkEvents(t, got, offsets(1, 7), errs)
	reqs := rec.all()
	if len(reqs) != 2 {
		t.Fatalf("%d connections, want 2", len(reqs))
	}
	if reqs[0].Path != "/v1/runs/r1/events" || reqs[0].Query != "after=-1" || reqs[0].Header.Get("Last-Event-ID") != "" {
		t.Errorf("first connection: %s?%s Last-Event-ID %q", reqs[0].Path, reqs[0].Query, reqs[0].Header.Get("Last-Event-ID"))
	}
	if reqs[1].Query != "" || reqs[1].Header.Get("Last-Event-ID") != string(off(3)) {
		t.Errorf("second connection: ?%s Last-Event-ID %q, want no query and %s", reqs[1].Query, reqs[1].Header.Get("Last-Event-ID"), off(3))
	}
}

// A stream that ends early, cleanly (max lifetime, a proxy) resumes, and
// every event is seen once, in order, across several drops.
func TestSubscribeResumesAfterEachDrop(t *testing.T) {
	const per = 5
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		if want := off((n - 1) * per); n > 1 && s.Header.Get("Last-Event-ID") != string(want) {
			http.Error(w, "wrong cursor", http.StatusTeapot)
			return
		}
		st := openStream(w)
		st.connected(15000)
		if n == 4 {
			st.send(finished(n*per - per + 1))
			return
		}
		st.send(deltas((n-1)*per+1, n*per)...)
	})
	got, _, errs := collect(t, c.Subscribe(testCtx(t), SubscribeRequest{RunID: "r1", After: tether.OffsetStart}))
	checkEvents(t, got, offsets(1, 3*per+1), errs)
	if n := len(rec.all()); n != 4 {
		t.Errorf("%d connections, want 4", n)
	}
}

// A server that repeats events after a reconnect (a bug) does not make
// the consumer see them twice.
func TestSubscribeDedupes(t *testing.T) {
	c, _ := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		st := openStream(w)
		st.connected(15000)
		if n == 1 {
			st.send(deltas(1, 4)...)
			return
		}
		st.send(deltas(2, 3)...) // before the cursor
		st.send(delta(5), delta(4), delta(6), delta(6), finished(7))
	})
	got, _, errs := collect(t, c.Subscribe(testCtx(t), SubscribeRequest{RunID: "r1", After: tether.OffsetStart}))
	checkEvents(t, got, []tether.Offset{off(1), off(2), off(3), off(4), off(5), off(6), off(7)}, errs)
}

// A reconnect frame makes the client come back at once, while the old
// stream is still open: no backoff (an hour here) and no wait for EOF.
func TestSubscribeReconnectFrame(t *testing.T) {
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		st := openStream(w)
		st.connected(15000)
		if n == 1 {
			st.send(deltas(1, 2)...)
			st.raw("event: reconnect\n\n")
			<-r.Context().Done()
			return
		}
		st.send(finished(3))
	})
	c.min, c.max = time.Hour, time.Hour
	got, _, errs := collect(t, c.Subscribe(testCtx(t), SubscribeRequest{RunID: "r1", After: tether.OffsetStart}))
	checkEvents(t, got, offsets(1, 3), errs)
	if reqs := rec.all(); len(reqs) != 2 || reqs[1].Header.Get("Last-Event-ID") != string(off(2)) {
		t.Errorf("requests %+v", reqs)
	}
}

// A stream with nothing (not even a ping) for 3 heartbeats is dropped and
// resumed.
func TestSubscribeStall(t *testing.T) {
	// The server sees the dropped connection when its background read
	// fails, which can come after the client has already resumed and
	// finished: wait for it rather than look once.
	cancelled := make(chan struct{})
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		st := openStream(w)
		st.connected(20)
		if n == 1 {
			st.send(delta(1))
			select {
			case <-r.Context().Done():
				close(cancelled)
			case <-time.After(10 * time.Second):
			}
			return
		}
		st.send(finished(2))
	})
	got, _, errs := collect(t, c.Subscribe(testCtx(t), SubscribeRequest{RunID: "r1", After: tether.OffsetStart}))
	checkEvents(t, got, offsets(1, 2), errs)
	if reqs := rec.all(); len(reqs) != 2 || reqs[1].Header.Get("Last-Event-ID") != string(off(1)) {
		t.Errorf("requests %+v", reqs)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Error("the stalled request was not cancelled")
	}
}

// Pings keep a quiet stream alive, and a consumer slower than the stall
// timeout is not taken for a dead server. On the clock of a synctest
// bubble: the stall timeout (3 heartbeats, 750ms) is exact, so the pings
// can span more than it (2s) and a late write on a loaded machine cannot
// look like a stall.
func TestSubscribeNoFalseStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		resume := make(chan struct{})
		c, rec := serveOn(t, newPipeListener(), func(n int, s seen, w http.ResponseWriter, r *http.Request) {
			st := openStream(w)
			st.connected(250)
			for range 20 {
				time.Sleep(100 * time.Millisecond)
				st.raw("event: ping\ndata: {}\n\n")
			}
			st.send(delta(1))
			select {
			case <-resume:
			case <-r.Context().Done():
				return
			}
			st.send(finished(2))
		})
		var got []tether.Offset
		for u, err := range c.Subscribe(testCtx(t), SubscribeRequest{RunID: "r1", After: tether.OffsetStart}) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, u.Event.Offset)
			if len(got) == 1 {
				time.Sleep(1500 * time.Millisecond) // 3 heartbeats is 750ms
				close(resume)
			}
		}
		checkEvents(t, got, offsets(1, 2), nil)
		if n := len(rec.all()); n != 1 {
			t.Errorf("%d connections, want 1", n)
		}
	})
}

func TestSubscribeFatalStatus(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 410} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
				writeJSON(w, status, `{"error":{"code":"not_found","message":"run r1 not found"}}`)
			})
			var states []State
			got, _, errs := collect(t, c.Subscribe(testCtx(t), SubscribeRequest{RunID: "r1", OnState: func(s State) { states = append(states, s) }}))
			if len(got) != 0 || len(errs) != 1 || !errors.Is(errs[0], tether.ErrNotFound) {
				t.Fatalf("events %v, errors %v", got, errs)
			}
			if n := len(rec.all()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
			if want := []State{StateConnecting, StateClosed}; !reflect.DeepEqual(states, want) {
				t.Errorf("states %v, want %v", states, want)
			}
		})
	}
}

func TestSubscribeRetriesServerErrors(t *testing.T) {
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 1:
			writeJSON(w, http.StatusServiceUnavailable, `{"error":{"code":"unavailable","message":"starting"}}`)
		case 2:
			http.Error(w, "bad gateway", http.StatusBadGateway)
		case 3:
			writeJSON(w, http.StatusTooManyRequests, `{"error":{"code":"rate_limited","message":"slow down"}}`)
		default:
			st := openStream(w)
			st.connected(15000)
			st.send(delta(1), finished(2))
		}
	})
	got, _, errs := collect(t, c.Subscribe(testCtx(t), SubscribeRequest{RunID: "r1", After: tether.OffsetStart}))
	checkEvents(t, got, offsets(1, 2), errs)
	reqs := rec.all()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	for _, r := range reqs {
		if r.Query != "after=-1" { // no event yet: the first cursor still holds
			t.Errorf("query %q", r.Query)
		}
	}
}

func TestSubscribeNotAnEventStream(t *testing.T) {
	c, _ := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html>login</html>"))
	})
	_, _, errs := collect(t, c.Subscribe(testCtx(t), SubscribeRequest{ThreadID: "t1"}))
	if len(errs) != 1 || tether.CodeOf(errs[0]) != CodeProtocol || strings.Contains(errs[0].Error(), "login") {
		t.Fatalf("errors %v", errs)
	}
}

// An event whose data is not JSON ends the subscription with code
// protocol: resuming would read the same event again.
func TestSubscribeEventNotJSON(t *testing.T) {
	c, _ := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		st := openStream(w)
		st.connected(15000)
		st.raw("id: " + string(off(1)) + "\nevent: text.delta\ndata: <html>login</html>\n\n")
	})
	_, _, errs := collect(t, c.Subscribe(testCtx(t), SubscribeRequest{RunID: "r1", After: tether.OffsetStart}))
	if len(errs) != 1 || tether.CodeOf(errs[0]) != CodeProtocol || strings.Contains(errs[0].Error(), "login") {
		t.Fatalf("errors %v", errs)
	}
}

// A run subscription ends after run.finished, even if the server keeps the
// stream open.
func TestSubscribeRunEnds(t *testing.T) {
	c, _ := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		st := openStream(w)
		st.connected(15000)
		st.send(delta(1))
		// Another run's end does not end this subscription.
		st.send(tether.Event{Offset: off(2), Type: tether.EventRunFinished, RunID: "r0", Status: "done"})
		st.send(finished(3), delta(4))
		<-r.Context().Done()
	})
	got, _, errs := collect(t, c.Subscribe(testCtx(t), SubscribeRequest{RunID: "r1", After: tether.OffsetStart}))
	checkEvents(t, got, offsets(1, 3), errs)
}

func TestSubscribeMessageEnds(t *testing.T) {
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		st := openStream(w)
		st.connected(15000)
		st.send(tether.Event{Offset: off(1), Type: tether.EventMessageStarted, RunID: "r1", MessageID: "m1", Role: tether.RoleAssistant})
		st.send(delta(2))
		st.send(tether.Event{Offset: off(3), Type: tether.EventMessageFinished, RunID: "r1", MessageID: "m1", Status: "done"})
		<-r.Context().Done()
	})
	got, _, errs := collect(t, c.Subscribe(testCtx(t), SubscribeRequest{ThreadID: "t1", MessageID: "m1", Types: []string{"message.started", "text.delta", "message.finished"}, After: tether.OffsetStart}))
	checkEvents(t, got, offsets(1, 3), errs)
	r := rec.all()[0]
	if r.Path != "/v1/threads/t1/events" || r.Query != "after=-1&message_id=m1&types=message.started%2Ctext.delta%2Cmessage.finished" {
		t.Errorf("request %s?%s", r.Path, r.Query)
	}
	if r.Header.Get("Accept") != "text/event-stream" || r.Header.Get("Authorization") != "Bearer sekret" {
		t.Errorf("headers %v", r.Header)
	}
}

func snapshotJSON(offset tether.Offset, runStatus tether.RunStatus) string {
	return fmt.Sprintf(`{"thread":{"id":"t1","status":"busy","metadata":{},"last_offset":%q,"active_run_id":"r1"},"runs":[{"id":"r1","thread_id":"t1","agent":"demo","input":{"messages":[]},"status":%q,"metadata":{},"attempt":1}],"messages":[],"offset":%q}`, offset, runStatus, offset)
}

// With no After, a snapshot comes first; it is yielded and becomes the
// cursor of a reconnect.
func TestSubscribeSnapshot(t *testing.T) {
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		st := openStream(w)
		st.connected(15000)
		if n == 1 {
			st.raw(fmt.Sprintf("event: snapshot\nid: %s\ndata: %s\n\n", off(5), snapshotJSON(off(5), tether.RunRunning)))
			return
		}
		st.send(delta(6), finished(7))
	})
	got, snaps, errs := collect(t, c.Subscribe(testCtx(t), SubscribeRequest{RunID: "r1"}))
	checkEvents(t, got, offsets(6, 7), errs)
	if len(snaps) != 1 || snaps[0].Offset != off(5) || snaps[0].Thread.ID != "t1" || snaps[0].Runs[0].Status != tether.RunRunning {
		t.Fatalf("snapshots %+v", snaps)
	}
	reqs := rec.all()
	if len(reqs) != 2 || reqs[0].Query != "" || reqs[0].Header.Get("Last-Event-ID") != "" || reqs[1].Header.Get("Last-Event-ID") != string(off(5)) {
		t.Errorf("requests %+v", reqs)
	}
}

// A snapshot that shows the run already finished ends a run subscription.
func TestSubscribeSnapshotOfFinishedRun(t *testing.T) {
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		st := openStream(w)
		st.connected(15000)
		st.raw(fmt.Sprintf("event: snapshot\nid: %s\ndata: %s\n\n", off(9), snapshotJSON(off(9), tether.RunDone)))
		<-r.Context().Done()
	})
	_, snaps, errs := collect(t, c.Subscribe(testCtx(t), SubscribeRequest{RunID: "r1"}))
	if len(snaps) != 1 || len(errs) != 0 {
		t.Fatalf("snapshots %v errors %v", snaps, errs)
	}
	if n := len(rec.all()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// The run finished while the client was away, and the events it missed
// were filtered out by ?types, so the server closes the stream right after
// connected. The client asks for the run's status and stops instead of
// reconnecting forever.
func TestSubscribeRunFinishedBeforeCursor(t *testing.T) {
	var streams, gets atomic.Int32
	c, _ := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		if s.Path == "/v1/runs/r1" {
			gets.Add(1)
			writeJSON(w, http.StatusOK, `{"run":{"id":"r1","thread_id":"t1","status":"done"},"messages":[]}`)
			return
		}
		st := openStream(w)
		st.connected(15000)
		if streams.Add(1) == 1 {
			st.send(delta(1))
			panic(http.ErrAbortHandler)
		}
	})
	got, _, errs := collect(t, c.Subscribe(testCtx(t), SubscribeRequest{RunID: "r1", Types: []string{"text.delta"}, After: tether.OffsetStart}))
	checkEvents(t, got, offsets(1, 1), errs)
	if streams.Load() != 2 || gets.Load() != 1 {
		t.Errorf("%d streams and %d GETs of the run, want 2 and 1", streams.Load(), gets.Load())
	}
}

// While the run is not over, an empty stream is just resumed.
func TestSubscribeEmptyStreamOfLiveRun(t *testing.T) {
	var streams atomic.Int32
	c, _ := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		if s.Path == "/v1/runs/r1" {
			writeJSON(w, http.StatusOK, `{"run":{"id":"r1","thread_id":"t1","status":"running"},"messages":[]}`)
			return
		}
		st := openStream(w)
		st.connected(15000)
		if streams.Add(1) == 3 {
			st.send(finished(1))
		}
	})
	got, _, errs := collect(t, c.Subscribe(testCtx(t), SubscribeRequest{RunID: "r1", After: tether.OffsetStart}))
	checkEvents(t, got, offsets(1, 1), errs)
}

// With After "now", the tail at connect time becomes the cursor, so that
// a reconnect does not skip what came in between.
func TestSubscribeAfterNow(t *testing.T) {
	var streams []seen
	c, _ := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		if s.Path == "/v1/runs/r1" {
			writeJSON(w, http.StatusOK, `{"run":{"id":"r1","thread_id":"t1","status":"running"},"messages":[]}`)
			return
		}
		streams = append(streams, s) // the client makes one request at a time
		st := openStream(w)
		st.connected(15000) // the tail is off(0)
		if len(streams) == 2 {
			st.send(finished(1))
		}
	})
	got, _, errs := collect(t, c.Subscribe(testCtx(t), SubscribeRequest{RunID: "r1", After: tether.OffsetNow}))
	checkEvents(t, got, offsets(1, 1), errs)
	if len(streams) != 2 || streams[0].Query != "after=now" || streams[1].Query != "" || streams[1].Header.Get("Last-Event-ID") != string(off(0)) {
		t.Errorf("requests %+v", streams)
	}
}

func TestSubscribeOnState(t *testing.T) {
	c, _ := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		st := openStream(w)
		st.connected(15000)
		if n == 1 {
			st.send(delta(1))
			return
		}
		st.send(finished(2))
	})
	var states []State
	_, _, errs := collect(t, c.Subscribe(testCtx(t), SubscribeRequest{RunID: "r1", After: tether.OffsetStart, OnState: func(s State) { states = append(states, s) }}))
	want := []State{StateConnecting, StateOpen, StateReconnecting, StateOpen, StateClosed}
	if len(errs) > 0 || !reflect.DeepEqual(states, want) {
		t.Errorf("states %v, want %v (errors %v)", states, want, errs)
	}
}

func TestSubscribeContextCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _ := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		st := openStream(w)
		st.connected(15000)
		st.send(delta(1))
		<-r.Context().Done()
	})
	var errs []error
	for u, err := range c.Subscribe(ctx, SubscribeRequest{ThreadID: "t1", After: tether.OffsetStart}) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if u.Event.Offset == off(1) {
			cancel()
		}
	}
	if len(errs) != 1 || !errors.Is(errs[0], context.Canceled) {
		t.Errorf("errors %v, want one context.Canceled", errs)
	}
}

func TestSubscribeNeedsID(t *testing.T) {
	c := New("http://127.0.0.1:1", nil)
	_, _, errs := collect(t, c.Subscribe(context.Background(), SubscribeRequest{}))
	if len(errs) != 1 || !errors.Is(errs[0], tether.ErrBadRequest) {
		t.Errorf("errors %v", errs)
	}
}

// Breaking out of the loop closes the request, and no goroutine of the
// client is left behind.
func TestSubscribeBreakCleansUp(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	handlerDone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := openStream(w)
		st.connected(15000)
		st.send(deltas(1, 5)...)
		<-r.Context().Done()
		close(handlerDone)
	}))
	c := New(srv.URL, nil)
	n := 0
	for _, err := range c.Subscribe(context.Background(), SubscribeRequest{ThreadID: "t1", After: tether.OffsetStart}) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 2 {
			break
		}
	}
	select {
	case <-handlerDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the server still streams after the consumer left")
	}
	srv.Close()
	goleak.VerifyNone(t, ignore)
}

// A server that asks to reconnect again and again without sending
// anything gets the backoff after the first time.
func TestSubscribeReconnectLoop(t *testing.T) {
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		st := openStream(w)
		st.connected(15000)
		st.raw("event: reconnect\ndata: {}\n\n")
	})
	c.min, c.max = time.Hour, time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, _, errs := collect(t, c.Subscribe(ctx, SubscribeRequest{ThreadID: "t1"}))
	if len(errs) != 1 || !errors.Is(errs[0], context.DeadlineExceeded) {
		t.Errorf("errors %v", errs)
	}
	if n := len(rec.all()); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

// A reset snapshot (the cursor was not in the log) replaces the state and
// becomes the cursor, even if it is older than the last event.
func TestSubscribeResetSnapshot(t *testing.T) {
	c, rec := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		st := openStream(w)
		st.connected(15000)
		switch n {
		case 1:
			st.send(deltas(1, 5)...)
		case 2:
			snap := strings.Replace(snapshotJSON(off(3), tether.RunRunning), `"offset"`, `"reset":true,"offset"`, 1)
			st.raw(fmt.Sprintf("event: snapshot\nid: %s\ndata: %s\n\n", off(3), snap))
			st.send(delta(4))
			panic(http.ErrAbortHandler)
		default:
			st.send(finished(5))
		}
	})
	got, snaps, errs := collect(t, c.Subscribe(testCtx(t), SubscribeRequest{RunID: "r1", After: tether.OffsetStart}))
	checkEvents(t, got, []tether.Offset{off(1), off(2), off(3), off(4), off(5), off(4), off(5)}, errs)
	if len(snaps) != 1 || !snaps[0].Reset {
		t.Errorf("snapshots %+v", snaps)
	}
	if reqs := rec.all(); len(reqs) != 3 || reqs[2].Header.Get("Last-Event-ID") != string(off(4)) {
		t.Errorf("requests %+v", reqs)
	}
}

// An end frame completes a run subscription at once: no extra GET of the
// run, no reconnect. A thread_deleted end is a not_found error.
func TestSubscribeEndFrame(t *testing.T) {
	var streams, gets atomic.Int32
	c, _ := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		if s.Path == "/v1/runs/r1" {
			gets.Add(1)
			writeJSON(w, http.StatusOK, `{"run":{"id":"r1","thread_id":"t1","status":"done"},"messages":[]}`)
			return
		}
		st := openStream(w)
		st.connected(15000)
		streams.Add(1)
		if s.Path == "/v1/threads/t1/events" {
			st.raw("event: end\ndata: {\"reason\":\"thread_deleted\"}\n\n")
			return
		}
		st.raw("event: end\ndata: {\"reason\":\"run_finished\"}\n\n")
	})
	got, _, errs := collect(t, c.Subscribe(testCtx(t), SubscribeRequest{RunID: "r1", After: tether.OffsetStart}))
	checkEvents(t, got, nil, errs)
	if streams.Load() != 1 || gets.Load() != 0 {
		t.Errorf("%d streams and %d GETs of the run, want 1 and 0", streams.Load(), gets.Load())
	}
	_, _, errs = collect(t, c.Subscribe(testCtx(t), SubscribeRequest{ThreadID: "t1", After: tether.OffsetStart}))
	if len(errs) != 1 || tether.CodeOf(errs[0]) != tether.CodeNotFound {
		t.Fatalf("deleted thread: %v", errs)
	}
}

// A stream that could not start after ":ok" says why in-band: end with
// reason error is that error, final (as its status would have been);
// reconnect with reason unavailable is resumed, like a 503.
func TestSubscribeErrorAfterPreamble(t *testing.T) {
	var streams atomic.Int32
	c, _ := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		st := openStream(w)
		streams.Add(1)
		switch {
		case s.Path == "/v1/threads/nope/events":
			st.raw("event: end\ndata: {\"reason\":\"error\",\"error\":{\"code\":\"not_found\",\"message\":\"thread nope not found\"}}\n\n")
		case n == 2:
			st.raw("event: reconnect\ndata: {\"reason\":\"unavailable\",\"error\":{\"code\":\"unavailable\",\"message\":\"the store did not answer in time; retry\"}}\n\n")
		default:
			st.connected(15000)
			st.send(delta(1), tether.Event{Offset: off(2), Type: tether.EventRunFinished, RunID: "r1", Status: "done"})
		}
	})
	got, _, errs := collect(t, c.Subscribe(testCtx(t), SubscribeRequest{ThreadID: "nope", After: tether.OffsetStart}))
	if len(got) != 0 || len(errs) != 1 || !errors.Is(errs[0], tether.ErrNotFound) || !strings.Contains(errs[0].Error(), "thread nope not found") {
		t.Fatalf("unknown thread: events %v, errors %v", got, errs)
	}
	if n := streams.Load(); n != 1 {
		t.Fatalf("%d requests for an unknown thread, want 1", n)
	}
	got, _, errs = collect(t, c.Subscribe(testCtx(t), SubscribeRequest{RunID: "r1", After: tether.OffsetStart}))
	checkEvents(t, got, offsets(1, 2), errs)
}

// delays records the delay of each "resuming" log line of a subscription.
type delays struct {
	mu sync.Mutex
	d  []time.Duration
}

func (h *delays) Enabled(context.Context, slog.Level) bool { return true }
func (h *delays) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *delays) WithGroup(string) slog.Handler            { return h }
func (h *delays) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "delay" {
			h.mu.Lock()
			h.d = append(h.d, a.Value.Duration())
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

// TestSubscribeRetryAfter: a 429 or 503 with Retry-After is tried again
// no sooner than it says (up to MaxBackoff), as REST calls are.
func TestSubscribeRetryAfter(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) == 1 {
					w.Header().Set("Retry-After", "1")
					writeJSON(w, status, `{"error":{"code":"rate_limited","message":"too many streams open at once"}}`)
					return
				}
				st := openStream(w)
				st.connected(15000)
				st.send(delta(1), finished(2))
			}))
			t.Cleanup(srv.Close)
			h := &delays{}
			c := New(srv.URL, &Options{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Second, Logger: slog.New(h)})
			got, _, errs := collect(t, c.Subscribe(testCtx(t), SubscribeRequest{RunID: "r1", After: tether.OffsetStart}))
			checkEvents(t, got, offsets(1, 2), errs)
			h.mu.Lock()
			defer h.mu.Unlock()
			if len(h.d) != 1 || h.d[0] < time.Second {
				t.Fatalf("delays %v, want one of at least the Retry-After, 1s", h.d)
			}
		})
	}
}
