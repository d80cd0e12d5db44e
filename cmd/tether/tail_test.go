package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	tether "github.com/tetherhq/tether"
)

// tailScript is a thread's log after a snapshot at off(2).
func tailScript() []tether.Event {
	return script(
		tether.Event{Type: tether.EventRunCreated, Run: &tether.Run{ID: "r1", ThreadID: "t1", Agent: "demo"}},
		tether.Event{Type: tether.EventRunStarted, WorkerID: "local", Attempt: 1},
		tether.Event{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant},
		tether.Event{Type: tether.EventTextDelta, MessageID: "m1", Delta: "Hello "},
		tether.Event{Type: tether.EventTextDelta, MessageID: "m1", Delta: "world."},
		tether.Event{Type: tether.EventRunFinished, Status: "error", Error: json.RawMessage(`{"code":"demo_failure","message":"boom"}`)},
	)
}

const tailSnapshot = `{"thread":{"id":"t1","status":"busy","metadata":{},"last_offset":"0000000001_0000000000000002","active_run_id":"r1"},"runs":[],"messages":[],"offset":"0000000001_0000000000000002"}`

// tailServer serves the snapshot and events 3 to 6, breaking the first
// connection in the middle of event 5, then waits for the client to leave.
func tailServer(t *testing.T) *fakeServer {
	evs := tailScript()
	return newFakeServer(t, func(n int, s *sse, r *http.Request) {
		if n == 1 {
			s.raw(fmt.Sprintf("event: snapshot\nid: %s\ndata: %s\n\n", off(2), tailSnapshot))
			s.send(evs[2:4]...)
			s.dropMidFrame(evs[4])
		}
		s.send(evs[4:]...)
		<-r.Context().Done()
	})
}

// tailUntil runs tail until stdout has n lines, then stops it as Ctrl-C
// would.
func tailUntil(t *testing.T, n int, env func(string) string, args ...string) ([]string, string, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	lw := &lineWriter{n: n, do: cancel}
	var errOut strings.Builder
	err := tailCmd(ctx, args, env, lw, &errOut)
	return strings.Split(strings.TrimSuffix(lw.buf.String(), "\n"), "\n"), errOut.String(), err
}

// lineWriter calls do once n lines were written.
type lineWriter struct {
	buf strings.Builder
	n   int
	do  func()
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	if w.do != nil && strings.Count(w.buf.String(), "\n") >= w.n {
		w.do()
		w.do = nil
	}
	return len(p), nil
}

func TestTailJSON(t *testing.T) {
	f := tailServer(t)
	lines, _, err := tailUntil(t, 5, envOf("TETHER_SERVER", f.URL), "t1")
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	var first struct {
		Snapshot *tether.Snapshot `json:"snapshot"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.Snapshot == nil || first.Snapshot.Offset != off(2) || first.Snapshot.Thread.ID != "t1" {
		t.Errorf("first line %s (%v)", lines[0], err)
	}
	for i, l := range lines[1:] {
		var ev tether.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Offset != off(i+3) {
			t.Errorf("line %d: %s (%v), want the event at %s", i+1, l, err, off(i+3))
		}
	}
	if want := []string{" ", " " + string(off(4))}; !slices.Equal(f.state().streams, want) {
		t.Errorf("streams (query and Last-Event-ID) %q, want %q", f.state().streams, want)
	}
}

func TestTailText(t *testing.T) {
	f := tailServer(t)
	lines, _, err := tailUntil(t, 5, envOf("TETHER_SERVER", f.URL, "TETHER_FORMAT", "text"), "t1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("%s snapshot             thread t1 busy, 0 runs, 0 messages", off(2)),
		fmt.Sprintf("%s message.started      m1 assistant", off(3)),
		fmt.Sprintf("%s text.delta           m1 \"Hello \"", off(4)),
		fmt.Sprintf("%s text.delta           m1 \"world.\"", off(5)),
		fmt.Sprintf("%s run.finished         run r1 error: demo_failure: boom", off(6)),
	}
	if !slices.Equal(lines, want) {
		t.Errorf("lines\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

func TestTailAfter(t *testing.T) {
	evs := tailScript()
	f := newFakeServer(t, func(n int, s *sse, r *http.Request) {
		s.send(evs...)
		<-r.Context().Done()
	})
	lines, _, err := tailUntil(t, len(evs), envOf("TETHER_AFTER", "-1"), "--server", f.URL, "t1", "--format", "text")
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != len(evs) || !strings.HasPrefix(lines[0], string(off(1))+" run.created ") || !strings.Contains(lines[0], "run r1 agent demo") {
		t.Errorf("lines:\n%s", strings.Join(lines, "\n"))
	}
	if st := f.state(); st.streams[0] != "after=-1 " {
		t.Errorf("first stream %q", st.streams[0])
	}
}

func TestTailNotFound(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, `{"error":{"code":"not_found","message":"thread nope not found"}}`)
	}))
	defer srv.Close()
	_, _, err := tailUntil(t, 1, envOf("TETHER_SERVER", srv.URL), "nope")
	if err == nil || err.Error() != "follow the thread: not_found: thread nope not found" {
		t.Fatalf("err = %v", err)
	}
}

func TestTailUsage(t *testing.T) {
	env := envOf()
	for _, args := range [][]string{{}, {"a", "b"}} {
		if _, _, err := tailUntil(t, 1, env, args...); err != errUsage {
			t.Errorf("%q: err = %v, want errUsage", args, err)
		}
	}
	if _, _, err := tailUntil(t, 1, env, "--format", "yaml", "t1"); err == nil || !strings.Contains(err.Error(), "--format") {
		t.Errorf("bad format: err = %v", err)
	}
	if _, _, err := tailUntil(t, 1, env, "--after", "x/y", "t1"); err == nil || !strings.Contains(err.Error(), "--after") {
		t.Errorf("bad offset: err = %v", err)
	}
}

// A tail whose server goes away says so at once, and says when it is back,
// with the offset it resumes after; while the server answers 503 it keeps
// trying without repeating itself.
func TestTailSaysWhenItLosesTheServer(t *testing.T) {
	evs := tailScript()
	f := newFakeServer(t, func(n int, s *sse, r *http.Request) {
		if n == 1 {
			s.raw(fmt.Sprintf("event: snapshot\nid: %s\ndata: %s\n\n", off(2), tailSnapshot))
			s.send(evs[2:4]...)
			s.dropMidFrame(evs[4])
		}
		s.send(evs[4:]...)
		<-r.Context().Done()
	})
	// The second and third tries find the server unavailable.
	inner := f.Config.Handler
	var tries atomic.Int32
	f.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := tries.Add(1); n == 2 || n == 3 {
			writeJSON(w, http.StatusServiceUnavailable, `{"error":{"code":"unavailable","message":"starting"}}`)
			return
		}
		inner.ServeHTTP(w, r)
	})
	lines, errOut, err := tailUntil(t, 5, envOf("TETHER_SERVER", f.URL, "TETHER_FORMAT", "text"), "t1")
	if err != nil || len(lines) != 5 {
		t.Fatalf("%v: %q", err, lines)
	}
	want := "tether: lost the connection to the server; reconnecting (resuming after offset " + string(off(4)) + ")…\n" +
		"tether: reconnected; resuming after offset " + string(off(4)) + "\n"
	if errOut != want {
		t.Errorf("stderr %q\nwant %q", errOut, want)
	}
}

// A tail started before its server answers (the README's second terminal
// opened first) says that it waits for the server, not that it lost a
// connection it never had, and says when it is connected.
func TestTailSaysWhenTheServerIsNotThereYet(t *testing.T) {
	evs := tailScript()
	f := newFakeServer(t, func(n int, s *sse, r *http.Request) {
		s.raw(fmt.Sprintf("event: snapshot\nid: %s\ndata: %s\n\n", off(2), tailSnapshot))
		s.send(evs[2:]...)
		<-r.Context().Done()
	})
	inner := f.Config.Handler
	var tries atomic.Int32
	f.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tries.Add(1) <= 2 {
			writeJSON(w, http.StatusServiceUnavailable, `{"error":{"code":"unavailable","message":"starting"}}`)
			return
		}
		inner.ServeHTTP(w, r)
	})
	lines, errOut, err := tailUntil(t, 3, envOf("TETHER_SERVER", f.URL, "TETHER_FORMAT", "text"), "t1")
	if err != nil || len(lines) < 3 {
		t.Fatalf("%v: %q", err, lines)
	}
	want := "tether: no answer from the server at " + f.URL + " yet; trying again until it answers (Ctrl-C to stop)…\n" +
		"tether: connected\n"
	if errOut != want {
		t.Errorf("stderr %q\nwant %q", errOut, want)
	}
}

// One run and one message are said so, not "1 runs, 1 messages".
func TestSnapshotLineCounts(t *testing.T) {
	s := &tether.Snapshot{Offset: off(2), Thread: tether.Thread{ID: "t1", Status: "busy"},
		Runs: make([]tether.Run, 1), Messages: make([]tether.Message, 3)}
	if got, want := snapshotLine(s), fmt.Sprintf("%s snapshot             thread t1 busy, 1 run, 3 messages", off(2)); got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}
