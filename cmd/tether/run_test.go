package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
)

// fakeServer speaks the wire protocol from a script: it creates thread t1
// and run r1, and streams what the test's stream function writes.
type fakeServer struct {
	*httptest.Server
	stream func(n int, s *sse, r *http.Request) // the nth connection to an events path
	run    string                               // the answer of GET /v1/runs/r1

	mu    sync.Mutex
	seen  seenState
	input chan struct{} // gets a value for each input
}

// seenState is what a fakeServer received.
type seenState struct {
	threads int      // threads created
	runPath string   // where the run was created
	runAuth string   // its Authorization header
	runBody string   // its body
	streams []string // the query and Last-Event-ID of each stream
	inputs  []string // bodies of inputs
}

func (f *fakeServer) state() seenState {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.seen
	s.streams = append([]string(nil), s.streams...)
	s.inputs = append([]string(nil), s.inputs...)
	return s
}

func newFakeServer(t *testing.T, stream func(n int, s *sse, r *http.Request)) *fakeServer {
	t.Helper()
	f := &fakeServer{stream: stream, input: make(chan struct{}, 10)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/threads", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.seen.threads++
		f.mu.Unlock()
		writeJSON(w, http.StatusCreated, `{"id":"t1","status":"idle","metadata":{},"last_offset":"-1","active_run_id":null}`)
	})
	mux.HandleFunc("POST /v1/threads/{tid}/runs", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.seen.runPath, f.seen.runAuth, f.seen.runBody = r.URL.Path, r.Header.Get("Authorization"), string(body)
		f.mu.Unlock()
		writeJSON(w, http.StatusCreated, fmt.Sprintf(`{"id":"r1","thread_id":%q,"agent":"demo","input":{"messages":[]},"status":"pending","metadata":{},"attempt":0}`, r.PathValue("tid")))
	})
	mux.HandleFunc("GET /v1/runs/r1", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, f.run)
	})
	mux.HandleFunc("POST /v1/runs/r1/input", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.seen.inputs = append(f.seen.inputs, string(body))
		f.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		f.input <- struct{}{}
	})
	events := func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.seen.streams = append(f.seen.streams, r.URL.RawQuery+" "+r.Header.Get("Last-Event-ID"))
		n := len(f.seen.streams)
		f.mu.Unlock()
		f.stream(n, openSSE(w), r)
	}
	mux.HandleFunc("GET /v1/runs/r1/events", events)
	mux.HandleFunc("GET /v1/threads/{tid}/events", events)
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// sse writes a scripted event stream.
type sse struct{ w http.ResponseWriter }

func openSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	s := &sse{w}
	s.raw(":ok\n\nevent: connected\ndata: {\"thread_id\":\"t1\",\"offset\":\"-1\",\"heartbeat_ms\":15000}\n\n")
	return s
}

func (s *sse) raw(str string) {
	_, _ = io.WriteString(s.w, str)
	s.w.(http.Flusher).Flush()
}

func (s *sse) send(evs ...tether.Event) {
	for _, e := range evs {
		s.raw(frame(e))
	}
}

func frame(e tether.Event) string {
	b, _ := json.Marshal(e)
	return fmt.Sprintf("id: %s\nevent: %s\ndata: %s\n\n", e.Offset, e.Type, b)
}

// dropMidFrame sends half of the frame of e and breaks the connection.
func (s *sse) dropMidFrame(e tether.Event) {
	f := frame(e)
	s.raw(f[:len(f)/2])
	panic(http.ErrAbortHandler)
}

func off(i int) tether.Offset { return tether.FormatOffset(1, uint64(i)) }

// script numbers events from 1 and sets their run.
func script(evs ...tether.Event) []tether.Event {
	for i := range evs {
		evs[i].Offset = off(i + 1)
		if evs[i].RunID == "" {
			evs[i].RunID = "r1"
		}
	}
	return evs
}

// answerScript is a whole run: input, reasoning, a tool call, the answer.
func answerScript(end tether.Event) []tether.Event {
	return script(
		tether.Event{Type: tether.EventRunCreated, Run: &tether.Run{ID: "r1", ThreadID: "t1", Agent: "demo"}},
		tether.Event{Type: tether.EventMessageCreated, Message: &tether.Message{ID: "u1", Role: tether.RoleUser, Parts: []tether.Part{{Type: "text", Text: "hello"}}}},
		tether.Event{Type: tether.EventRunStarted, WorkerID: "local", Attempt: 1},
		tether.Event{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant},
		tether.Event{Type: tether.EventReasoningDelta, MessageID: "m1", Delta: "Think "},
		tether.Event{Type: tether.EventReasoningDelta, MessageID: "m1", Delta: "hard."},
		tether.Event{Type: tether.EventToolStarted, MessageID: "m1", CallID: "c1", Name: "search"},
		tether.Event{Type: tether.EventToolDelta, MessageID: "m1", CallID: "c1", Delta: `{"query":`},
		tether.Event{Type: tether.EventToolDelta, MessageID: "m1", CallID: "c1", Delta: `"hello"}`},
		tether.Event{Type: tether.EventToolFinished, MessageID: "m1", CallID: "c1", Output: json.RawMessage(`{"results":[]}`)},
		tether.Event{Type: tether.EventTextDelta, MessageID: "m1", Delta: "Here "},
		tether.Event{Type: tether.EventTextDelta, MessageID: "m1", Delta: "is "},
		tether.Event{Type: tether.EventTextDelta, MessageID: "m1", Delta: "the "},
		tether.Event{Type: tether.EventTextDelta, MessageID: "m1", Delta: "answer."},
		tether.Event{Type: tether.EventMessageFinished, MessageID: "m1", Status: "done"},
		end,
	)
}

var runDone = tether.Event{Type: tether.EventRunFinished, Status: "done"}

// dropAt streams evs over two connections, the first broken in the middle
// of event number at (from 1); the second must resume after the event
// before it.
func dropAt(t *testing.T, evs []tether.Event, at int) func(n int, s *sse, r *http.Request) {
	return func(n int, s *sse, r *http.Request) {
		if n == 1 {
			s.send(evs[:at-1]...)
			s.dropMidFrame(evs[at-1])
		}
		if got := r.Header.Get("Last-Event-ID"); got != string(off(at-1)) {
			t.Errorf("connection %d: Last-Event-ID %q, want %s", n, got, off(at-1))
			return
		}
		s.send(evs[at-1:]...)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// envOf returns an env function over pairs of name and value.
func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func runWith(t *testing.T, ctx context.Context, env func(string) string, in string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	old := stdin
	stdin = strings.NewReader(in)
	defer func() { stdin = old }()
	var out, errb bytes.Buffer
	err = runCmd(ctx, args, env, &out, &errb)
	return out.String(), errb.String(), err
}

func TestRunPrintsTheAnswer(t *testing.T) {
	evs := answerScript(runDone)
	f := newFakeServer(t, dropAt(t, evs, 13))
	out, errOut, err := runWith(t, testCtx(t), envOf("TETHER_SERVER", f.URL), "", "hello")
	if err != nil {
		t.Fatalf("err = %v\nstderr:\n%s", err, errOut)
	}
	if out != "Here is the answer.\n" {
		t.Errorf("stdout = %q", out)
	}
	// The drop is told, with where the stream resumes.
	wantErr := "run r1 on thread t1\n→ search {\"query\":\"hello\"}\n← done\n" +
		"tether: lost the connection to the server; reconnecting (resuming after offset " + string(off(12)) + ")…\n" +
		"tether: reconnected; resuming after offset " + string(off(12)) + "\n"
	if errOut != wantErr {
		t.Errorf("stderr = %q\nwant %q", errOut, wantErr)
	}
	st := f.state()
	if want := []string{"after=-1 ", " " + string(off(12))}; !slices.Equal(st.streams, want) {
		t.Errorf("streams (query and Last-Event-ID) %q, want %q", st.streams, want)
	}
	var body struct {
		Agent    string          `json:"agent"`
		Input    tether.RunInput `json:"input"`
		Metadata json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(st.runBody), &body); err != nil {
		t.Fatal(err)
	}
	if body.Agent != "demo" || len(body.Input.Messages) != 1 || body.Input.Messages[0].Content != "hello" || body.Input.Messages[0].Role != "user" || body.Metadata != nil {
		t.Errorf("run body = %s", st.runBody)
	}
	if st.threads != 1 || st.runPath != "/v1/threads/t1/runs" {
		t.Errorf("threads created %d, run created at %s", st.threads, st.runPath)
	}
}

func TestRunShowsReasoning(t *testing.T) {
	f := newFakeServer(t, func(n int, s *sse, r *http.Request) { s.send(answerScript(runDone)...) })
	_, errOut, err := runWith(t, testCtx(t), envOf("TETHER_REASONING", "true"), "", "--server", f.URL, "hello")
	if err != nil {
		t.Fatal(err)
	}
	want := "run r1 on thread t1\nThink hard.\n→ search {\"query\":\"hello\"}\n← done\n"
	if errOut != want {
		t.Errorf("stderr = %q\nwant %q", errOut, want)
	}
}

func TestRunJSON(t *testing.T) {
	evs := answerScript(runDone)
	f := newFakeServer(t, dropAt(t, evs, 7))
	out, _, err := runWith(t, testCtx(t), envOf("TETHER_SERVER", f.URL, "TETHER_JSON", "1"), "", "hello")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(evs) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(evs), out)
	}
	for i, l := range lines {
		var ev tether.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, l)
		}
		if ev.Offset != evs[i].Offset || ev.Type != evs[i].Type {
			t.Errorf("line %d: %s %s, want %s %s", i, ev.Offset, ev.Type, evs[i].Offset, evs[i].Type)
		}
	}
}

func TestRunFails(t *testing.T) {
	end := tether.Event{Type: tether.EventRunFinished, Status: "error", Error: json.RawMessage(`{"code":"demo_failure","message":"The demo agent failed on purpose."}`)}
	f := newFakeServer(t, func(n int, s *sse, r *http.Request) { s.send(answerScript(end)...) })
	out, _, err := runWith(t, testCtx(t), envOf("TETHER_SERVER", f.URL), "", "hello")
	if err == nil || err.Error() != "run r1 ended error: The demo agent failed on purpose." {
		t.Fatalf("err = %v", err)
	}
	if out != "Here is the answer.\n" {
		t.Errorf("stdout = %q", out)
	}
}

// The run ended before the stream's cursor (here: the server says so by
// closing right after connected); the client checks the run and so does
// the command.
func TestRunAlreadyOver(t *testing.T) {
	f := newFakeServer(t, func(n int, s *sse, r *http.Request) {})
	f.run = `{"run":{"id":"r1","thread_id":"t1","status":"aborted","error":{"code":"server_restart","message":"The server restarted."}},"messages":[]}`
	_, _, err := runWith(t, testCtx(t), envOf("TETHER_SERVER", f.URL), "", "hello")
	if err == nil || err.Error() != "run r1 ended aborted: The server restarted." {
		t.Fatalf("err = %v", err)
	}
}

func TestRunAnswersAWaitingRun(t *testing.T) {
	evs := script(
		tether.Event{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant},
		tether.Event{Type: tether.EventRunWaiting, Request: &tether.Request{ID: "q1", Kind: "input", Payload: json.RawMessage(`{"prompt":"Which detail?"}`)}},
		tether.Event{Type: tether.EventRunInput, RequestID: "q1", Value: json.RawMessage(`"blue"`)},
		tether.Event{Type: tether.EventTextDelta, MessageID: "m1", Delta: "Blue it is."},
		runDone,
	)
	var f *fakeServer
	f = newFakeServer(t, func(n int, s *sse, r *http.Request) {
		s.send(evs[:2]...)
		select {
		case <-f.input:
		case <-r.Context().Done():
			return
		}
		s.send(evs[2:]...)
	})
	out, errOut, err := runWith(t, testCtx(t), envOf("TETHER_SERVER", f.URL), "blue\n", "hello")
	if err != nil {
		t.Fatal(err)
	}
	if out != "Blue it is.\n" {
		t.Errorf("stdout = %q", out)
	}
	if !strings.Contains(errOut, "? Which detail?\n") {
		t.Errorf("stderr = %q", errOut)
	}
	if st := f.state(); len(st.inputs) != 1 || st.inputs[0] != `{"request_id":"q1","value":"blue"}` {
		t.Errorf("inputs = %q", st.inputs)
	}
}

func TestRunWaitingWithEmptyStdin(t *testing.T) {
	f := newFakeServer(t, func(n int, s *sse, r *http.Request) {
		s.send(script(tether.Event{Type: tether.EventRunWaiting, Request: &tether.Request{ID: "q1", Kind: "input"}})...)
		<-r.Context().Done()
	})
	_, _, err := runWith(t, testCtx(t), envOf("TETHER_SERVER", f.URL), "", "hello")
	if err == nil || !strings.Contains(err.Error(), "stdin is empty") || !strings.Contains(err.Error(), "/v1/runs/r1/input") {
		t.Fatalf("err = %v", err)
	}
}

func TestRunInterrupted(t *testing.T) {
	evs := answerScript(runDone)
	f := newFakeServer(t, func(n int, s *sse, r *http.Request) {
		s.send(evs[:12]...)
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(testCtx(t))
	out := &notifyWriter{when: "is ", do: cancel}
	var errOut bytes.Buffer
	old := stdin
	stdin = strings.NewReader("")
	defer func() { stdin = old }()
	err := runCmd(ctx, []string{"--server", f.URL, "hello"}, envOf(), out, &errOut)
	if err == nil || err.Error() != "interrupted" {
		t.Fatalf("err = %v", err)
	}
	want := fmt.Sprintf("Follow it with: tether tail --after %s t1\n", off(12))
	if !strings.HasSuffix(errOut.String(), want) {
		t.Errorf("stderr = %q, want it to end with %q", errOut.String(), want)
	}
	if out.String() != "Here is \n" {
		t.Errorf("stdout = %q", out.String())
	}
}

// notifyWriter calls do once what was written contains when.
type notifyWriter struct {
	buf  bytes.Buffer
	when string
	do   func()
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	n, err := w.buf.Write(p)
	if w.do != nil && strings.Contains(w.buf.String(), w.when) {
		w.do()
		w.do = nil
	}
	return n, err
}

func (w *notifyWriter) String() string { return w.buf.String() }

func TestRunOnThreadWithMetadata(t *testing.T) {
	f := newFakeServer(t, func(n int, s *sse, r *http.Request) { s.send(script(runDone)...) })
	env := envOf("TETHER_SERVER", f.URL, "TETHER_THREAD", "t9", "TETHER_AGENT", "echo", "TETHER_TOKEN", "sekret")
	_, _, err := runWith(t, testCtx(t), env, "", "--metadata", `{"demo":{"tokens":5}}`, "two", "words")
	if err != nil {
		t.Fatal(err)
	}
	st := f.state()
	if st.threads != 0 || st.runPath != "/v1/threads/t9/runs" {
		t.Errorf("threads created %d, run created at %s", st.threads, st.runPath)
	}
	want := `{"agent":"echo","input":{"messages":[{"role":"user","content":"two words"}]},"metadata":{"demo":{"tokens":5}}}`
	if st.runBody != want {
		t.Errorf("run body = %s\nwant %s", st.runBody, want)
	}
	if st.runAuth != "Bearer sekret" {
		t.Errorf("Authorization = %q", st.runAuth)
	}
}

func TestRunUsage(t *testing.T) {
	if _, _, err := runWith(t, testCtx(t), envOf(), ""); err != errUsage {
		t.Errorf("no prompt: err = %v, want errUsage", err)
	}
	if _, _, err := runWith(t, testCtx(t), envOf(), "", "--metadata", "[1]", "hi"); err == nil || !strings.Contains(err.Error(), "JSON object") {
		t.Errorf("bad metadata: err = %v", err)
	}
	if _, _, err := runWith(t, testCtx(t), envOf("TETHER_JSON", "maybe"), "", "hi"); err == nil || !strings.Contains(err.Error(), "TETHER_JSON") {
		t.Errorf("bad env: err = %v", err)
	}
}

func TestRunServerErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusUnauthorized, `{"error":{"code":"unauthorized","message":"a valid token is needed"}}`)
	}))
	defer srv.Close()
	_, _, err := runWith(t, testCtx(t), envOf("TETHER_SERVER", srv.URL), "", "hi")
	if err == nil || err.Error() != "create a thread: unauthorized: a valid token is needed" || !errors.Is(err, tether.ErrUnauthorized) {
		t.Fatalf("err = %v", err)
	}
}

// Flags may follow the prompt; after "--" everything is the prompt.
func TestRunFlagsAfterPrompt(t *testing.T) {
	f := newFakeServer(t, func(n int, s *sse, r *http.Request) { s.send(answerScript(runDone)...) })
	out, _, err := runWith(t, testCtx(t), envOf(), "", "two", "--server", f.URL, "words", "--json", "--", "--agent", "x")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, `{"offset":`) {
		t.Errorf("--json after the prompt was not taken as a flag: %q", out)
	}
	var body struct {
		Agent string          `json:"agent"`
		Input tether.RunInput `json:"input"`
	}
	if err := json.Unmarshal([]byte(f.state().runBody), &body); err != nil {
		t.Fatal(err)
	}
	if body.Agent != "demo" || body.Input.Messages[0].Content != "two words --agent x" {
		t.Errorf("agent %q, prompt %q", body.Agent, body.Input.Messages[0].Content)
	}
}

// Ctrl-C while the run is being created: the server may have made it
// already, so the command says where to look rather than only "context
// canceled".
func TestRunInterruptedWhileCreating(t *testing.T) {
	arrived := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" && r.URL.Path == "/v1/threads/t1/runs" {
			_, _ = io.Copy(io.Discard, r.Body) // so that the server sees the client go
			close(arrived)
			<-r.Context().Done()
			return
		}
		http.NotFound(w, r)
	}))
	defer hs.Close()
	ctx, cancel := context.WithCancel(testCtx(t))
	go func() { <-arrived; cancel() }()
	_, stderr, err := runWith(t, ctx, envOf(), "", "--server", hs.URL, "--thread", "t1", "hello")
	if err == nil || err.Error() != "interrupted" {
		t.Fatalf("err %v, want interrupted", err)
	}
	if !strings.Contains(stderr, "may have started") || !strings.Contains(stderr, "tether tail t1") {
		t.Fatalf("stderr %q, want where to look for the run", stderr)
	}
}

// A reset snapshot mid-run (the server lost the events this output was
// at): the text goes on, and stderr says that what was printed may differ
// from the run's answer. Before, nothing was said.
func TestRunSaysWhenTheLogWasReset(t *testing.T) {
	evs := answerScript(runDone)
	f := newFakeServer(t, func(n int, s *sse, r *http.Request) {
		if n == 1 {
			s.send(evs[:12]...) // "Here is " printed
			panic(http.ErrAbortHandler)
		}
		// After a crash that lost the tail: the log ends at event 11.
		snap := fmt.Sprintf(`{"reset":true,"thread":{"id":"t1","status":"busy","metadata":{},"last_offset":%q,"active_run_id":"r1"},"runs":[],"messages":[],"offset":%q}`, off(11), off(11))
		s.raw(fmt.Sprintf("event: snapshot\nid: %s\ndata: %s\n\n", off(11), snap))
		s.send(evs[11:]...)
	})
	out, errOut, err := runWith(t, testCtx(t), envOf("TETHER_SERVER", f.URL), "", "hello")
	if err != nil {
		t.Fatalf("err = %v\nstderr:\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "no longer has the events") || !strings.Contains(errOut, string(off(11))) {
		t.Errorf("stderr = %q, want a note of the reset", errOut)
	}
	if !strings.HasSuffix(out, "answer.\n") {
		t.Errorf("stdout = %q", out)
	}
}
