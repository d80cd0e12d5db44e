package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/agents/openai"
	"github.com/tetherhq/tether/agents/runner"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"))
}

// secret is in every error body of the fake server: it must never reach
// a client or the log.
const secret = "SECRET-UPSTREAM-DETAIL-4f7a"

// fake is an OpenAI-compatible server. handle answers request n (from 0).
type fake struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []received
}

type received struct {
	header http.Header
	body   map[string]any
}

func newFake(t *testing.T, handle func(n int, w http.ResponseWriter, r *http.Request)) *fake {
	t.Helper()
	f := &fake{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "no such route", http.StatusNotFound)
			return
		}
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Errorf("request body is not JSON: %v: %s", err, raw)
		}
		f.mu.Lock()
		n := len(f.reqs)
		f.reqs = append(f.reqs, received{r.Header.Clone(), body})
		f.mu.Unlock()
		handle(n, w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fake) requests() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.reqs...)
}

// streamSSE answers 200 with an event stream and writes text in uneven
// pieces, flushing after each, so that lines and events arrive split.
func streamSSE(w http.ResponseWriter, text string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	sizes := []int{1, 7, 3, 19, 2, 31, 5, 64}
	for i := 0; text != ""; i++ {
		n := min(sizes[i%len(sizes)], len(text))
		if _, err := io.WriteString(w, text[:n]); err != nil {
			return
		}
		rc.Flush()
		text = text[n:]
	}
}

// sse is the event stream of chunks, each a JSON object.
func sse(chunks ...string) string {
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString("data: " + c + "\n\n")
	}
	return b.String()
}

const done = "data: [DONE]\n\n"

func q(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// delta is a chunk with one delta for choice 0.
func delta(d string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m1-2025","choices":[{"index":0,"delta":` + d + `,"finish_reason":null}]}`
}

func content(s string) string   { return delta(`{"content":` + q(s) + `}`) }
func reasoning(s string) string { return delta(`{"reasoning_content":` + q(s) + `}`) }

func finish(reason string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m1-2025","choices":[{"index":0,"delta":{},"finish_reason":` + q(reason) + `}]}`
}

const usage = `{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m1-2025","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}`

// setup is an agent against a fake server.
type setup struct {
	f     *fake
	a     *openai.Agent
	log   *testutil.SyncBuffer
	mu    sync.Mutex
	waits []time.Duration
}

func (s *setup) pauses() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

// newAgent returns an agent for f (model m1, key sk-test) whose retry
// pauses are recorded rather than slept.
func newAgent(t *testing.T, f *fake, opts openai.Options) *setup {
	t.Helper()
	s := &setup{f: f, log: &testutil.SyncBuffer{}}
	opts.BaseURL = f.URL + "/v1"
	if opts.Model == "" {
		opts.Model = "m1"
	}
	if opts.Model == "-" {
		opts.Model = ""
	}
	opts.APIKey = "sk-test"
	opts.Logger = slog.New(slog.NewTextHandler(s.log, nil))
	a, err := openai.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	openai.SetRetry(a, time.Millisecond, 3*time.Second, func(ctx context.Context, d time.Duration) error {
		s.mu.Lock()
		s.waits = append(s.waits, d)
		s.mu.Unlock()
		return ctx.Err()
	})
	s.a = a
	return s
}

// world is an engine with a runner that holds the agent under its name.
type world struct {
	e  *engine.Engine
	st store.Store
}

func newWorld(t *testing.T, a agents.Agent) *world {
	t.Helper()
	st := testutil.OpenStore(t, "")
	e := engine.New(st, engine.Options{})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	rn := runner.New(e, map[string]agents.Agent{openai.Name: a}, runner.Options{})
	rn.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rn.Shutdown(ctx)
		e.Close()
	})
	return &world{e: e, st: st}
}

func user(text string) tether.InputMessage {
	return tether.InputMessage{Role: tether.RoleUser, Content: text}
}

// start starts a run of the agent on thread t1.
func (w *world) start(t *testing.T, meta string, input ...tether.InputMessage) string {
	t.Helper()
	ctx := context.Background()
	if _, _, err := w.e.CreateThread(ctx, "t1", nil); err != nil {
		t.Fatal(err)
	}
	if meta == "" {
		meta = "{}"
	}
	rc, err := w.e.CreateRun(ctx, "t1", engine.RunRequest{Agent: openai.Name, Metadata: []byte(meta), Input: tether.RunInput{Messages: input}})
	if err != nil {
		t.Fatal(err)
	}
	return rc.Run.ID
}

// wait waits until the run is terminal and returns its snapshot.
func (w *world) wait(t *testing.T, runID string) *tether.Snapshot {
	t.Helper()
	var snap *tether.Snapshot
	testutil.Eventually(t, 20*time.Second, "run "+runID+" to end", func() bool {
		var err error
		snap, err = w.e.Run(context.Background(), runID)
		return err == nil && snap.Runs[0].Status.Terminal()
	})
	return snap
}

// run runs the agent to its end and returns the snapshot of the run and
// the run's events.
func (w *world) run(t *testing.T, meta string, input ...tether.InputMessage) (*tether.Snapshot, []*tether.Event) {
	t.Helper()
	id := w.start(t, meta, input...)
	snap := w.wait(t, id)
	return snap, w.log(t, id)
}

// log reads the events of a run from the store.
func (w *world) log(t *testing.T, runID string) []*tether.Event {
	t.Helper()
	var out []*tether.Event
	after := tether.OffsetStart
	for {
		recs, err := w.st.ReadEvents(context.Background(), "t1", after, 500)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			ev, err := r.Decode()
			if err != nil {
				t.Fatal(err)
			}
			if ev.RunID == runID {
				out = append(out, ev)
			}
			after = r.Offset
		}
		if len(recs) < 500 {
			return out
		}
	}
}

// types lists the events' types, with runs of text.delta, reasoning.delta
// and tool.delta shortened to one.
func types(evs []*tether.Event) string {
	var out []string
	for _, e := range evs {
		if n := len(out); n > 0 && strings.HasSuffix(e.Type, ".delta") && out[n-1] == e.Type+"…" {
			continue
		}
		if strings.HasSuffix(e.Type, ".delta") {
			out = append(out, e.Type+"…")
			continue
		}
		out = append(out, e.Type)
	}
	return strings.Join(out, " ")
}

// answer returns the last message of a snapshot, which must be the
// agent's.
func answer(t *testing.T, snap *tether.Snapshot) tether.Message {
	t.Helper()
	if len(snap.Messages) == 0 {
		t.Fatal("no messages")
	}
	m := snap.Messages[len(snap.Messages)-1]
	if m.Role != tether.RoleAssistant {
		t.Fatalf("last message: %+v", m)
	}
	return m
}

func count(evs []*tether.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func text(m tether.Message) string {
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Type == tether.PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

func wantError(t *testing.T, snap *tether.Snapshot, code, message string) {
	t.Helper()
	r := snap.Runs[0]
	if r.Status != tether.RunError || r.Error == nil || r.Error.Code != code || !strings.Contains(r.Error.Message, message) {
		t.Fatalf("run %s, error %+v; want error %s %q", r.Status, r.Error, code, message)
	}
	if strings.Contains(r.Error.Message, secret) {
		t.Fatalf("the run's error quotes the provider: %q", r.Error.Message)
	}
}

func jsonEqual(t *testing.T, got any, want string) bool {
	t.Helper()
	var a, b any
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(g, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(a, b)
}

func TestText(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		streamSSE(w, ": keep-alive\n\n"+sse(delta(`{"role":"assistant","content":""}`), content("Hel"), content("lo"), content(", wor"), content("ld!"), finish("stop"), usage)+done)
	})
	s := newAgent(t, f, openai.Options{SystemPrompt: "Be brief."})
	w := newWorld(t, s.a)
	snap, log := w.run(t, "", user("hi"))

	if r := snap.Runs[0]; r.Status != tether.RunDone {
		t.Fatalf("run: %s %+v", r.Status, r.Error)
	}
	m := answer(t, snap)
	if m.Status != tether.MessageDone || len(m.Parts) != 1 || text(m) != "Hello, world!" {
		t.Fatalf("answer: %+v", m)
	}
	if !jsonEqual(t, m.Metadata, `{"model":"m1-2025","finish_reason":"stop","usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}`) {
		t.Fatalf("metadata: %s", m.Metadata)
	}
	want := "run.created message.created run.started message.started text.delta… message.updated message.finished run.finished"
	if got := types(log); got != want {
		t.Fatalf("log:\n got %s\nwant %s", got, want)
	}
	if n := count(log, tether.EventTextDelta); n != 4 {
		t.Fatalf("%d text.delta events, want one per content delta", n)
	}

	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	h := reqs[0].header
	if h.Get("Authorization") != "Bearer sk-test" || h.Get("Content-Type") != "application/json" || h.Get("Accept") != "text/event-stream" {
		t.Fatalf("headers: %v", h)
	}
	if !jsonEqual(t, reqs[0].body, `{"model":"m1","stream":true,"stream_options":{"include_usage":true},
		"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]}`) {
		t.Fatalf("request: %v", reqs[0].body)
	}
}

func TestNoAPIKey(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		streamSSE(w, sse(content("ok"), finish("stop"))+done)
	})
	a, err := openai.New(openai.Options{BaseURL: f.URL + "/v1/", Model: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, a)
	snap, _ := w.run(t, "", user("hi"))
	if snap.Runs[0].Status != tether.RunDone || text(answer(t, snap)) != "ok" {
		t.Fatalf("run: %+v", snap.Runs[0])
	}
	if h := f.requests()[0].header; h.Get("Authorization") != "" {
		t.Fatalf("Authorization sent without a key: %q", h.Get("Authorization"))
	}
}

func TestReasoningAndConversation(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			streamSSE(w, sse(
				reasoning("Think"), reasoning("ing."),
				content("First"), content(" answer."),
				delta(`{"reasoning":"More thought.","content":null}`),
				// A provider that sends both names sends the same text.
				delta(`{"reasoning_content":"Again.","reasoning":"Again."}`),
				delta(`{"reasoning":{"summary":"not a string"},"content":" Done."}`),
				finish("stop"))+done)
			return
		}
		streamSSE(w, sse(content("Because."), finish("stop"))+done)
	})
	s := newAgent(t, f, openai.Options{SystemPrompt: "sys"})
	w := newWorld(t, s.a)
	snap, log := w.run(t, "", user("hi"))
	m := answer(t, snap)
	type part struct{ Type, Text string }
	var got []part
	for _, p := range m.Parts {
		got = append(got, part{p.Type, p.Text})
	}
	want := []part{
		{tether.PartReasoning, "Thinking."},
		{tether.PartText, "First answer."},
		{tether.PartReasoning, "More thought.Again."},
		{tether.PartText, " Done."},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parts:\n got %+v\nwant %+v", got, want)
	}
	if got := types(log); !strings.Contains(got, "reasoning.delta… text.delta… reasoning.delta… text.delta… message.updated") {
		t.Fatalf("log: %s", got)
	}

	// The next run sends the conversation: text only, in order, without
	// empty messages.
	snap, _ = w.run(t, "", tether.InputMessage{Role: tether.RoleSystem, Content: ""}, user("why?"))
	if snap.Runs[0].Status != tether.RunDone {
		t.Fatalf("second run: %+v", snap.Runs[0])
	}
	reqs := f.requests()
	if !jsonEqual(t, reqs[1].body["messages"], `[{"role":"system","content":"sys"},{"role":"user","content":"hi"},
		{"role":"assistant","content":"First answer. Done."},{"role":"user","content":"why?"}]`) {
		t.Fatalf("messages: %v", reqs[1].body["messages"])
	}
}

func TestToolCalls(t *testing.T) {
	tc := func(s string) string { return delta(`{"tool_calls":[` + s + `]}`) }
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		streamSSE(w, sse(
			content("Let me check."),
			tc(`{"index":0,"id":"call_a","type":"function","function":{"name":"search","arguments":""}}`),
			// No id: the agent makes one up.
			tc(`{"index":1,"type":"function","function":{"name":"lookup","arguments":"{\"id\""}}`),
			tc(`{"index":0,"function":{"arguments":"{\"q\":"}}`),
			tc(`{"index":1,"function":{"arguments":":42}"}},{"index":0,"function":{"arguments":"\"go\"}"}}`),
			// An id Tether cannot use, and arguments that are not JSON.
			tc(`{"index":2,"id":"call with spaces","type":"function","function":{"name":"broken","arguments":"{oops"}}`),
			finish("tool_calls"), usage)+done)
	})
	s := newAgent(t, f, openai.Options{})
	w := newWorld(t, s.a)
	snap, log := w.run(t, "", user("find go"))
	if snap.Runs[0].Status != tether.RunDone {
		t.Fatalf("run: %+v", snap.Runs[0])
	}
	m := answer(t, snap)
	if len(m.Parts) != 4 || m.Parts[0].Text != "Let me check." {
		t.Fatalf("parts: %+v", m.Parts)
	}
	calls := m.Parts[1:]
	wantCalls := []struct{ id, name, input string }{
		{"call_a", "search", `{"q":"go"}`},
		{m.ID + "-call1", "lookup", `{"id":42}`},
		{m.ID + "-call2", "broken", `"{oops"`},
	}
	for i, want := range wantCalls {
		p := calls[i]
		if p.Type != tether.PartTool || p.CallID != want.id || p.Name != want.name || p.Status != tether.ToolDone || string(p.Input) != want.input || p.InputText != "" {
			t.Errorf("call %d: %+v (input %s), want %+v", i, p, p.Input, want)
		}
	}
	var finished []string
	for _, e := range log {
		if e.Type == tether.EventToolFinished {
			finished = append(finished, e.CallID+"="+string(e.Input))
		}
	}
	wantFinished := []string{`call_a={"q":"go"}`, m.ID + `-call1={"id":42}`, m.ID + "-call2="}
	if !reflect.DeepEqual(finished, wantFinished) {
		t.Fatalf("tool.finished: %q, want %q", finished, wantFinished)
	}
	want := "message.started text.delta… tool.started tool.started tool.delta… tool.started tool.delta… tool.finished tool.finished tool.finished message.updated message.finished run.finished"
	if got := types(log[3:]); got != want {
		t.Fatalf("log:\n got %s\nwant %s", got, want)
	}
	if !strings.Contains(string(m.Metadata), `"finish_reason":"tool_calls"`) {
		t.Fatalf("metadata: %s", m.Metadata)
	}
}

// Some servers send each call whole at index 0; a new id there is a new
// call. A call named only in a later delta starts then, with what came
// before.
func TestToolCallsOddShapes(t *testing.T) {
	tc := func(s string) string { return delta(`{"tool_calls":[` + s + `]}`) }
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		streamSSE(w, sse(
			tc(`{"index":0,"id":"c1","function":{"name":"a","arguments":"{}"}}`),
			tc(`{"index":0,"id":"c2","function":{"name":"b","arguments":"{\"x\":1}"}}`),
			tc(`{"index":1,"id":"c3","function":{"arguments":"{\"late\":"}}`),
			tc(`{"index":1,"function":{"name":"named_late","arguments":"true}"}}`),
			// Without index: its position in the list.
			tc(`{"id":"c1","function":{"name":"dup","arguments":"[]"}}`),
			// Arguments too large to repeat in tool.finished.
			tc(`{"index":2,"id":"c4","function":{"name":"big","arguments":"{\"s\":\""}}`),
			tc(`{"index":2,"function":{"arguments":"`+strings.Repeat("x", 40<<10)+`"}}`),
			tc(`{"index":2,"function":{"arguments":"`+strings.Repeat("y", 40<<10)+`\"}"}}`),
			finish("tool_calls"))+done)
	})
	s := newAgent(t, f, openai.Options{})
	w := newWorld(t, s.a)
	snap, log := w.run(t, "", user("go"))
	m := answer(t, snap)
	var got []string
	for _, p := range m.Parts[:4] {
		got = append(got, fmt.Sprintf("%s %s %s %s", p.CallID, p.Name, p.Input, p.Status))
	}
	want := []string{"c1 a {} done", "c2 b {\"x\":1} done", "c3 named_late {\"late\":true} done", m.ID + "-call1 dup [] done"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("calls:\n got %q\nwant %q", got, want)
	}
	big := `{"s":"` + strings.Repeat("x", 40<<10) + strings.Repeat("y", 40<<10) + `"}`
	if p := m.Parts[4]; len(m.Parts) != 5 || p.CallID != "c4" || string(p.Input) != big || p.Status != tether.ToolDone {
		t.Fatalf("big call: %d parts, %s %s input of %d bytes", len(m.Parts), p.CallID, p.Status, len(p.Input))
	}
	for _, e := range log {
		if e.Type == tether.EventToolFinished && e.CallID == "c4" && e.Input != nil {
			t.Fatal("tool.finished repeats large arguments")
		}
	}
}

func TestDropMidStream(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		streamSSE(w, sse(content("The answer"), content(" is forty")))
		// Cut the connection in the middle of an event.
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":" tw`)
		http.NewResponseController(w).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close()
	})
	s := newAgent(t, f, openai.Options{})
	w := newWorld(t, s.a)
	snap, log := w.run(t, "", user("q"))
	wantError(t, snap, openai.CodeUpstreamDisconnected, "The connection to the model provider dropped before the answer was complete.")
	m := answer(t, snap)
	if m.Status != tether.MessageError || text(m) != "The answer is forty" {
		t.Fatalf("answer: %+v", m)
	}
	if got, want := types(log[3:]), "message.started text.delta… message.finished run.finished"; got != want {
		t.Fatalf("log: %s", got)
	}
	if n := len(f.requests()); n != 1 {
		t.Fatalf("%d requests: a stream that streamed must not be retried", n)
	}
}

// A stream that ends cleanly but without [DONE] or a finish_reason is cut
// too; one with a finish_reason is complete.
func TestEndWithoutDone(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			streamSSE(w, sse(content("half")))
			return
		}
		streamSSE(w, sse(content("whole"), finish("length")))
	})
	s := newAgent(t, f, openai.Options{})
	w := newWorld(t, s.a)
	snap, _ := w.run(t, "", user("q"))
	wantError(t, snap, openai.CodeUpstreamDisconnected, "dropped")
	if m := answer(t, snap); text(m) != "half" || m.Status != tether.MessageError {
		t.Fatalf("answer: %+v", m)
	}
	snap, _ = w.run(t, "", user("q"))
	if m := answer(t, snap); snap.Runs[0].Status != tether.RunDone || text(m) != "whole" || !strings.Contains(string(m.Metadata), `"finish_reason":"length"`) {
		t.Fatalf("run %+v, answer %+v", snap.Runs[0], m)
	}
}

func TestDropBeforeOutputIsRetried(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			streamSSE(w, sse(delta(`{"role":"assistant","content":""}`)))
			return
		}
		streamSSE(w, sse(content("second try"), finish("stop"))+done)
	})
	s := newAgent(t, f, openai.Options{})
	w := newWorld(t, s.a)
	snap, log := w.run(t, "", user("q"))
	if snap.Runs[0].Status != tether.RunDone || text(answer(t, snap)) != "second try" {
		t.Fatalf("run %+v", snap.Runs[0])
	}
	if got := strings.Count(types(log), "message.started"); got != 1 || len(f.requests()) != 2 || len(s.pauses()) != 1 {
		t.Fatalf("%d messages, %d requests, pauses %v", got, len(f.requests()), s.pauses())
	}
}

func TestRateLimitedThenSuccess(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header [2]string
		want   time.Duration
	}{
		{"Retry-After capped", [2]string{"Retry-After", "30"}, 3 * time.Second},
		{"Retry-After", [2]string{"Retry-After", "2"}, 2 * time.Second},
		{"retry-after-ms", [2]string{"retry-after-ms", "250"}, 250 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					w.Header().Set(tc.header[0], tc.header[1])
					http.Error(w, `{"error":{"message":"`+secret+`","type":"requests","code":"rate_limit_exceeded"}}`, http.StatusTooManyRequests)
					return
				}
				streamSSE(w, sse(content("ok"), finish("stop"))+done)
			})
			s := newAgent(t, f, openai.Options{})
			w := newWorld(t, s.a)
			snap, _ := w.run(t, "", user("q"))
			if snap.Runs[0].Status != tether.RunDone || text(answer(t, snap)) != "ok" {
				t.Fatalf("run %+v", snap.Runs[0])
			}
			if p := s.pauses(); len(p) != 1 || p[0] != tc.want || len(f.requests()) != 2 {
				t.Fatalf("pauses %v (want [%v]), %d requests", p, tc.want, len(f.requests()))
			}
			if l := s.log.String(); !strings.Contains(l, "status=429") || !strings.Contains(l, "provider_error=requests/rate_limit_exceeded") || strings.Contains(l, secret) {
				t.Fatalf("log: %s", l)
			}
		})
	}
}

func TestRateLimitedToTheEnd(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		http.Error(w, secret, http.StatusTooManyRequests)
	})
	s := newAgent(t, f, openai.Options{MaxRetries: 3})
	w := newWorld(t, s.a)
	snap, log := w.run(t, "", user("q"))
	wantError(t, snap, openai.CodeUpstreamRateLimited, "The model provider answered HTTP 429.")
	if len(f.requests()) != 4 || len(s.pauses()) != 3 {
		t.Fatalf("%d requests, pauses %v", len(f.requests()), s.pauses())
	}
	if got := types(log); got != "run.created message.created run.started run.finished" {
		t.Fatalf("log: %s", got)
	}
}

func TestServerErrors(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error":{"message":"internal failure, key sk-live-`+secret+`","type":"server_error"}}`)
	})
	s := newAgent(t, f, openai.Options{})
	w := newWorld(t, s.a)
	snap, _ := w.run(t, "", user("q"))
	wantError(t, snap, openai.CodeUpstreamError, "The model provider answered HTTP 500.")
	if len(snap.Messages) != 1 {
		t.Fatalf("messages: %+v", snap.Messages)
	}
	p := s.pauses()
	if len(f.requests()) != 3 || len(p) != 2 {
		t.Fatalf("%d requests, pauses %v", len(f.requests()), p)
	}
	// Without Retry-After: exponential from the base (1ms here), jittered.
	if p[0] < time.Millisecond || p[0] > 2*time.Millisecond || p[1] < 2*time.Millisecond || p[1] > 3*time.Millisecond {
		t.Fatalf("pauses %v", p)
	}
	if l := s.log.String(); strings.Contains(l, secret) || strings.Contains(l, "sk-test") || !strings.Contains(l, "provider_error=server_error") {
		t.Fatalf("log: %s", l)
	}
}

func TestUnauthorizedIsNotRetried(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"Incorrect API key provided: `+secret+`","code":"invalid_api_key"}}`, http.StatusUnauthorized)
	})
	s := newAgent(t, f, openai.Options{})
	w := newWorld(t, s.a)
	snap, _ := w.run(t, "", user("q"))
	wantError(t, snap, openai.CodeUpstreamError, "The model provider answered HTTP 401.")
	if len(f.requests()) != 1 || len(s.pauses()) != 0 {
		t.Fatalf("%d requests, pauses %v", len(f.requests()), s.pauses())
	}
}

func TestUnreachable(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {})
	s := newAgent(t, f, openai.Options{MaxRetries: 1})
	f.Close()
	w := newWorld(t, s.a)
	snap, _ := w.run(t, "", user("q"))
	wantError(t, snap, openai.CodeUpstreamError, "The model provider could not be reached.")
	if len(s.pauses()) != 1 {
		t.Fatalf("pauses %v", s.pauses())
	}
}

func TestBadStreams(t *testing.T) {
	for _, tc := range []struct {
		name, body, code, message, text string
		requests                        int
	}{
		{"malformed chunk", sse(content("ok")) + "data: {\"choices\": [oops\n\n" + done, openai.CodeUpstreamError, "could not be read", "ok", 1},
		{"wrong type", sse(content("ok"), delta(`{"content":42}`)) + done, openai.CodeUpstreamError, "could not be read", "ok", 1},
		{"error in the stream", sse(content("ok"), `{"error":{"message":"`+secret+`","type":"server_error"}}`) + done, openai.CodeUpstreamError, "reported an error", "ok", 1},
		{"finish_reason error", sse(content("ok"), finish("error")) + done, openai.CodeUpstreamError, "reported an error", "ok", 1},
		// Before any output an error event is retried (three tries).
		{"error before output", sse(`{"error":{"message":"` + secret + `"}}`), openai.CodeUpstreamError, "reported an error", "", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) { streamSSE(w, tc.body) })
			s := newAgent(t, f, openai.Options{})
			w := newWorld(t, s.a)
			snap, _ := w.run(t, "", user("q"))
			wantError(t, snap, tc.code, tc.message)
			if tc.text != "" {
				if m := answer(t, snap); text(m) != tc.text || m.Status != tether.MessageError {
					t.Fatalf("answer: %+v", m)
				}
			} else if len(snap.Messages) != 1 {
				t.Fatalf("messages: %+v", snap.Messages)
			}
			if n := len(f.requests()); n != tc.requests {
				t.Fatalf("%d requests", n)
			}
			if strings.Contains(s.log.String(), secret) {
				t.Fatalf("log: %s", s.log)
			}
		})
	}
}

func TestNotStreamed(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"whole"},"finish_reason":"stop"}]}`)
	})
	s := newAgent(t, f, openai.Options{})
	w := newWorld(t, s.a)
	snap, _ := w.run(t, "", user("q"))
	wantError(t, snap, openai.CodeUpstreamError, "did not stream")
}

func TestCancelMidStream(t *testing.T) {
	gone := make(chan struct{})
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		streamSSE(w, sse(content("partial"), content(" answer")))
		<-r.Context().Done()
		close(gone)
	})
	s := newAgent(t, f, openai.Options{})
	w := newWorld(t, s.a)
	id := w.start(t, "", user("q"))
	// The deltas are appended while the provider is silent.
	testutil.Eventually(t, 10*time.Second, "the partial answer", func() bool {
		snap, err := w.e.Run(context.Background(), id)
		return err == nil && len(snap.Messages) == 2 && text(snap.Messages[1]) == "partial answer"
	})
	if _, err := w.e.CancelRun(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	snap := w.wait(t, id)
	if r := snap.Runs[0]; r.Status != tether.RunCancelled {
		t.Fatalf("run %s %+v", r.Status, r.Error)
	}
	if m := answer(t, snap); m.Status != tether.MessageAborted || text(m) != "partial answer" {
		t.Fatalf("answer %+v", m)
	}
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the request to the provider was not abandoned")
	}
}

func TestRunOptions(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		streamSSE(w, sse(content("ok"), finish("stop"))+done)
	})
	s := newAgent(t, f, openai.Options{})
	w := newWorld(t, s.a)
	for _, tc := range []struct{ meta, want string }{
		{`{"openai":{"model":"m2","temperature":0.2,"max_tokens":512}}`, `{"model":"m2","temperature":0.2,"max_tokens":512}`},
		{`{"openai":{"temperature":0}}`, `{"model":"m1","temperature":0}`},
		{`{"openai":null,"other":1}`, `{"model":"m1"}`},
	} {
		snap, _ := w.run(t, tc.meta, user("q"))
		if snap.Runs[0].Status != tether.RunDone {
			t.Fatalf("%s: run %+v", tc.meta, snap.Runs[0])
		}
		reqs := f.requests()
		body := reqs[len(reqs)-1].body
		got := map[string]any{"model": body["model"]}
		for _, k := range []string{"temperature", "max_tokens"} {
			if v, ok := body[k]; ok {
				got[k] = v
			}
		}
		if !jsonEqual(t, got, tc.want) {
			t.Errorf("%s: request %v, want %s", tc.meta, got, tc.want)
		}
	}

	sent := len(f.requests())
	for _, tc := range []struct{ meta, message string }{
		{`{"openai":"gpt-4o"}`, "metadata.openai must be an object"},
		{`{"openai":{"model":""}}`, "metadata.openai.model must be a string of 1 to 256 bytes"},
		{`{"openai":{"model":5}}`, `metadata.openai: field "model" must be a string, got number`},
		{`{"openai":{"temperature":"hot"}}`, `metadata.openai: field "temperature" must be a number, got string`},
		{`{"openai":{"temperature":2.5}}`, "metadata.openai.temperature must be a number from 0 to 2"},
		{`{"openai":{"max_tokens":1.5}}`, "metadata.openai.max_tokens must be a whole number"},
		{`{"openai":{"max_tokens":0}}`, "metadata.openai.max_tokens must be a whole number"},
		{`{"openai":{"max_tokens":"512"}}`, `metadata.openai: field "max_tokens" must be a number, got string`},
		{`{"openai":{"top_p":1}}`, `metadata.openai: unknown field "top_p" (known: model, temperature, max_tokens)`},
	} {
		snap, _ := w.run(t, tc.meta, user("q"))
		wantError(t, snap, openai.CodeBadOptions, tc.message)
	}
	if n := len(f.requests()); n != sent {
		t.Fatalf("runs with bad options sent %d requests", n-sent)
	}
}

func TestNoModel(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		streamSSE(w, sse(content("ok"), finish("stop"))+done)
	})
	s := newAgent(t, f, openai.Options{Model: "-"})
	w := newWorld(t, s.a)
	snap, _ := w.run(t, "", user("q"))
	wantError(t, snap, openai.CodeBadOptions, "no model is set for this run")
	snap, _ = w.run(t, `{"openai":{"model":"m3"}}`, user("q"))
	if snap.Runs[0].Status != tether.RunDone || f.requests()[0].body["model"] != "m3" {
		t.Fatalf("run %+v, requests %v", snap.Runs[0], f.requests())
	}
}

func TestBatching(t *testing.T) {
	const tokens = 300
	var chunks []string
	for i := range tokens {
		chunks = append(chunks, content(fmt.Sprintf("w%d ", i)))
	}
	body := sse(chunks...) + sse(finish("stop")) + done
	var want strings.Builder
	for i := range tokens {
		fmt.Fprintf(&want, "w%d ", i)
	}
	for _, tc := range []struct {
		name     string
		interval time.Duration
		check    func(appends int64) bool
	}{
		{"batched", 0, func(n int64) bool { return n < 20 }},
		{"unbatched", -1, func(n int64) bool { return n > tokens }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) { streamSSE(w, body) })
			s := newAgent(t, f, openai.Options{FlushInterval: tc.interval})
			w := newWorld(t, s.a)
			snap, log := w.run(t, "", user("q"))
			if got := text(answer(t, snap)); got != want.String() {
				t.Fatalf("text %q", got)
			}
			deltas := count(log, tether.EventTextDelta)
			appends := w.e.Counters().Appends.Load()
			t.Logf("%d text.delta events in %d appends", deltas, appends)
			if deltas != tokens || !tc.check(appends) {
				t.Fatalf("%d text.delta events in %d appends", deltas, appends)
			}
		})
	}
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		opts openai.Options
		err  string
	}{
		{openai.Options{}, "the base URL is required"},
		{openai.Options{BaseURL: "api.openai.com/v1"}, "must be an http or https URL"},
		{openai.Options{BaseURL: "ftp://example.com"}, "must be an http or https URL"},
		{openai.Options{BaseURL: "https://u:hunter2@example.com/v1#x"}, "https://u:xxxxx@example.com/v1#x"},
		{openai.Options{BaseURL: DefaultURL, APIKey: "sk-abc\n"}, "the API key contains a space or a control character"},
		{openai.Options{BaseURL: DefaultURL, MaxRetries: 11}, "MaxRetries must be at most 10"},
		{openai.Options{BaseURL: DefaultURL, Model: strings.Repeat("m", 257)}, "longer than 256 bytes"},
	} {
		_, err := openai.New(tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: error %v, want %q", tc.opts, err, tc.err)
		}
		if err != nil && (strings.Contains(err.Error(), "sk-abc") || strings.Contains(err.Error(), "hunter2")) {
			t.Errorf("error quotes a secret: %v", err)
		}
	}
	for base, want := range map[string]string{
		DefaultURL:                                "https://api.openai.com/v1/chat/completions",
		"http://localhost:11434/v1/":              "http://localhost:11434/v1/chat/completions",
		"https://gw.example/openai?api-version=1": "https://gw.example/openai/chat/completions?api-version=1",
	} {
		a, err := openai.New(openai.Options{BaseURL: base})
		if err != nil {
			t.Fatal(err)
		}
		if got := openai.URL(a); got != want {
			t.Errorf("%s: posts to %s, want %s", base, got, want)
		}
	}
}

const DefaultURL = openai.DefaultBaseURL

// A delta over the engine's event limit that comes with the end of the
// answer: the final append is refused, and the run must still end error
// (agent_error) at once, not wait for its lease to run out.
func TestHugeDeltaAtTheEnd(t *testing.T) {
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, sse(content(strings.Repeat("x", 2<<20)), finish("stop"))+done)
	})
	s := newAgent(t, f, openai.Options{})
	w := newWorld(t, s.a)
	snap, _ := w.run(t, "", user("q"))
	if r := snap.Runs[0]; r.Status != tether.RunError || r.Error == nil || r.Error.Code != agents.AgentErrorCode {
		t.Fatalf("run %s %+v", r.Status, r.Error)
	}
}

// A provider that answers, then keeps the connection open and sends
// nothing, must not hold the run forever: past the idle timeout the
// request is abandoned and the run ends error, what was streamed kept.
func TestSilentProvider(t *testing.T) {
	gone := make(chan struct{})
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		streamSSE(w, ": keep-alive\n\n"+sse(content("partial")))
		<-r.Context().Done()
		close(gone)
	})
	s := newAgent(t, f, openai.Options{IdleTimeout: 200 * time.Millisecond})
	w := newWorld(t, s.a)
	snap, _ := w.run(t, "", user("q"))
	wantError(t, snap, openai.CodeUpstreamDisconnected, "sent nothing")
	if m := answer(t, snap); m.Status != tether.MessageError || text(m) != "partial" {
		t.Fatalf("answer %+v", m)
	}
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the request to the provider was not abandoned")
	}
	if n := len(f.requests()); n != 1 {
		t.Fatalf("%d requests: a silent provider was asked again", n)
	}
}
