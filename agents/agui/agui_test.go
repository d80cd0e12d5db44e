package agui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/agents/agui"
	"github.com/tetherhq/tether/agents/runner"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"))
}

// secret is in every error body of the fake upstream: it must never reach
// a client.
const secret = "SECRET-UPSTREAM-DETAIL-91c2"

// upstream is an AG-UI server that answers request n with handle, and
// keeps the bodies it got.
type upstream struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []map[string]any
}

func newUpstream(t testing.TB, handle func(n int, w http.ResponseWriter, r *http.Request)) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		u.mu.Lock()
		n := len(u.bodies)
		u.bodies = append(u.bodies, body)
		u.mu.Unlock()
		if r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Accept") != "text/event-stream" {
			http.Error(w, "bad headers", 415)
			return
		}
		handle(n, w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) requests() []map[string]any {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]map[string]any(nil), u.bodies...)
}

// replay answers with a recorded stream of a real agent.
func replay(t testing.TB, names ...string) func(n int, w http.ResponseWriter, r *http.Request) {
	streams := make([][]byte, len(names))
	for i, n := range names {
		b, err := os.ReadFile("testdata/" + n + ".sse")
		if err != nil {
			t.Fatal(err)
		}
		streams[i] = b
	}
	return func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		if n < len(streams) {
			_, _ = w.Write(streams[n])
		}
	}
}

type world struct {
	e  *engine.Engine
	st store.Store
}

func newWorld(t testing.TB, url string) *world {
	t.Helper()
	return newWorldWith(t, agui.Options{URL: url})
}

// newWorldWith is newWorld with an agent of the given options.
func newWorldWith(t testing.TB, opts agui.Options) *world {
	t.Helper()
	return newWorldOn(t, testutil.OpenStore(t, ""), opts)
}

// newWorldOn is newWorldWith over st (a store that injects faults).
func newWorldOn(t testing.TB, st store.Store, opts agui.Options) *world {
	t.Helper()
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := agui.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(st, engine.Options{})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	rn := runner.New(e, map[string]agents.Agent{"research": a}, runner.Options{})
	rn.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rn.Shutdown(ctx)
		e.Close()
	})
	if _, _, err := e.CreateThread(context.Background(), "t1", nil); err != nil {
		t.Fatal(err)
	}
	return &world{e: e, st: st}
}

func (w *world) start(t testing.TB, meta, text string) string {
	t.Helper()
	if meta == "" {
		meta = "{}"
	}
	rc, err := w.e.CreateRun(context.Background(), "t1", engine.RunRequest{Agent: "research", Metadata: []byte(meta),
		Input: tether.RunInput{Messages: []tether.InputMessage{{Role: tether.RoleUser, Content: text}}}})
	if err != nil {
		t.Fatal(err)
	}
	return rc.Run.ID
}

func (w *world) waitStatus(t testing.TB, runID string, done func(tether.RunStatus) bool) *tether.Snapshot {
	t.Helper()
	var snap *tether.Snapshot
	testutil.Eventually(t, 20*time.Second, "run "+runID, func() bool {
		var err error
		snap, err = w.e.Run(context.Background(), runID)
		return err == nil && done(snap.Runs[0].Status)
	})
	return snap
}

func (w *world) wait(t testing.TB, runID string) *tether.Snapshot {
	return w.waitStatus(t, runID, tether.RunStatus.Terminal)
}

func (w *world) thread(t *testing.T) *tether.Snapshot {
	t.Helper()
	snap, err := w.e.Thread(context.Background(), "t1")
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func (w *world) log(t testing.TB, runID string) []*tether.Event {
	t.Helper()
	recs, err := w.st.ReadEvents(context.Background(), "t1", tether.OffsetStart, 10000)
	if err != nil {
		t.Fatal(err)
	}
	var out []*tether.Event
	for _, r := range recs {
		ev, err := r.Decode()
		if err != nil {
			t.Fatal(err)
		}
		if ev.RunID == runID {
			out = append(out, ev)
		}
	}
	return out
}

func answer(snap *tether.Snapshot) string {
	for i := len(snap.Messages) - 1; i >= 0; i-- {
		m := snap.Messages[i]
		if m.Role != tether.RoleAssistant {
			continue
		}
		var b strings.Builder
		for _, p := range m.Parts {
			if p.Type == tether.PartText {
				b.WriteString(p.Text)
			}
		}
		if b.Len() > 0 {
			return b.String()
		}
	}
	return ""
}

func TestPydanticStory(t *testing.T) {
	u := newUpstream(t, replay(t, "pydantic_story"))
	w := newWorld(t, u.URL)
	id := w.start(t, "", "story 5")
	snap := w.wait(t, id)
	if st := snap.Runs[0].Status; st != tether.RunDone {
		t.Fatalf("status %s (%+v)", st, snap.Runs[0].Error)
	}
	if got := answer(snap); got != "word0 word1 word2 word3 word4" {
		t.Fatalf("answer %q", got)
	}
	// The reasoning is its own message, before the answer.
	var reasoning string
	for _, m := range snap.Messages {
		for _, p := range m.Parts {
			if p.Type == tether.PartReasoning {
				reasoning += p.Text
			}
		}
	}
	if reasoning != "The user wants a story." {
		t.Fatalf("reasoning %q", reasoning)
	}
	body := u.requests()[0]
	msgs, _ := json.Marshal(body["messages"])
	if body["threadId"] != "t1" || body["runId"] != id || body["protocolVersion"] != "1.0" ||
		!strings.Contains(string(msgs), `"content":"story 5","id":"msg_`) || !strings.Contains(string(msgs), `"role":"user"`) {
		t.Fatalf("request %v", body)
	}
}

func TestPydanticToolCall(t *testing.T) {
	u := newUpstream(t, replay(t, "pydantic_tool"))
	w := newWorld(t, u.URL)
	id := w.start(t, "", "weather in Paris")
	snap := w.wait(t, id)
	if snap.Runs[0].Status != tether.RunDone || answer(snap) != "Done: lookup said sunny in Paris. " {
		t.Fatalf("status %s, answer %q", snap.Runs[0].Status, answer(snap))
	}
	var tool *tether.Part
	for i := range snap.Messages {
		for j := range snap.Messages[i].Parts {
			if p := &snap.Messages[i].Parts[j]; p.Type == tether.PartTool {
				tool = p
			}
		}
	}
	if tool == nil || tool.CallID != "call_lookup_1" || tool.Name != "lookup" || tool.Status != tether.ToolDone ||
		string(tool.Input) != `{"city": "Paris"}` || string(tool.Output) != `"sunny in Paris"` {
		t.Fatalf("tool part %+v", tool)
	}
}

// The interrupt makes the run wait with the upstream's interrupts; the
// answer goes upstream as resume[] with the call in the history, and the
// same run finishes.
func TestPydanticApproval(t *testing.T) {
	u := newUpstream(t, replay(t, "pydantic_interrupt", "pydantic_resume"))
	w := newWorld(t, u.URL)
	id := w.start(t, "", "delete notes")
	snap := w.waitStatus(t, id, func(s tether.RunStatus) bool { return s == tether.RunWaiting || s.Terminal() })
	r := snap.Runs[0]
	if r.Status != tether.RunWaiting || r.Request == nil || r.Request.ID != "int-call_delete_1" || r.Request.Kind != "ag-ui.interrupt" ||
		!strings.Contains(string(r.Request.Payload), `"toolCallId":"call_delete_1"`) {
		t.Fatalf("run %+v", r)
	}
	value := json.RawMessage(`{"resume":[{"interruptId":"int-call_delete_1","status":"resolved","payload":{"approved":true}}]}`)
	if _, err := w.e.SubmitInput(context.Background(), id, "int-call_delete_1", value); err != nil {
		t.Fatal(err)
	}
	snap = w.wait(t, id)
	if snap.Runs[0].Status != tether.RunDone || answer(snap) != "Done: delete_file said deleted notes.txt. " {
		t.Fatalf("status %s, answer %q", snap.Runs[0].Status, answer(snap))
	}
	reqs := u.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	resume, _ := json.Marshal(reqs[1]["resume"])
	msgs, _ := json.Marshal(reqs[1]["messages"])
	if string(resume) != `[{"interruptId":"int-call_delete_1","payload":{"approved":true},"status":"resolved"}]` ||
		!strings.Contains(string(msgs), `"toolCalls":[{"function":{"arguments":"{\"path\": \"notes.txt\"}","name":"delete_file"},"id":"call_delete_1","type":"function"}]`) {
		t.Fatalf("resume %s, messages %s", resume, msgs)
	}
	// The call got its result in the message it was made in.
	for _, m := range snap.Messages {
		for _, p := range m.Parts {
			if p.Type == tether.PartTool && (p.CallID != "call_delete_1" || string(p.Output) != `"deleted notes.txt"` || p.Status != tether.ToolDone) {
				t.Fatalf("tool part %+v", p)
			}
		}
	}
}

func TestPydanticModelError(t *testing.T) {
	u := newUpstream(t, replay(t, "pydantic_error"))
	w := newWorld(t, u.URL)
	snap := w.wait(t, w.start(t, "", "fail now"))
	r := snap.Runs[0]
	if r.Status != tether.RunError || r.Error == nil || r.Error.Code != "agent_error" || r.Error.Message != "the model is down" {
		t.Fatalf("run %+v %+v", r, r.Error)
	}
}

// LangGraph's state, steps, raw events and messages snapshot: the state is
// the thread's, the rest is kept as custom events, the answer streams.
func TestLangGraphState(t *testing.T) {
	u := newUpstream(t, replay(t, "langgraph_story"))
	w := newWorld(t, u.URL)
	id := w.start(t, "", "story 3")
	snap := w.wait(t, id)
	if snap.Runs[0].Status != tether.RunDone || answer(snap) != "word0 word1 word2" {
		t.Fatalf("status %s, answer %q", snap.Runs[0].Status, answer(snap))
	}
	th := w.thread(t)
	var state struct {
		Steps []string `json:"steps"`
		Count int      `json:"count"`
	}
	if err := json.Unmarshal(th.State, &state); err != nil || state.Count != 1 || strings.Join(state.Steps, ",") != "plan,answer" {
		t.Fatalf("state %s", th.State)
	}
	kinds := map[string]int{}
	for _, e := range w.log(t, id) {
		if e.Type == tether.EventCustom {
			kinds[e.Name]++
		} else {
			kinds[e.Type]++
		}
	}
	for _, k := range []string{"ag-ui.STEP_STARTED", "ag-ui.STEP_FINISHED", "ag-ui.RAW", "ag-ui.MESSAGES_SNAPSHOT", tether.EventStateSnapshot} {
		if kinds[k] == 0 {
			t.Fatalf("no %s in the log: %v", k, kinds)
		}
	}
}

// The upstream's body never reaches the run's error, whatever it holds.
func TestUpstreamFailures(t *testing.T) {
	for _, c := range []struct {
		name   string
		handle func(n int, w http.ResponseWriter, r *http.Request)
		code   string
		msg    string
	}{{
		name: "a 500",
		handle: func(n int, w http.ResponseWriter, r *http.Request) {
			http.Error(w, secret, http.StatusInternalServerError)
		},
		code: agui.CodeUpstreamError, msg: "The AG-UI agent answered HTTP 500.",
	}, {
		name: "not an event stream",
		handle: func(n int, w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"error":"` + secret + `"}`))
		},
		code: agui.CodeUpstreamError, msg: "The AG-UI agent did not answer with an event stream.",
	}, {
		name: "a malformed event",
		handle: func(n int, w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("data: {\"type\":\"RUN_STARTED\"}\n\ndata: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"" + secret + "\",\"delta\":\"x\"}\n\n"))
		},
		code: agui.CodeUpstreamError, msg: "The AG-UI agent sent TEXT_MESSAGE_CONTENT for a message that was not started.",
	}, {
		name: "no RUN_FINISHED",
		handle: func(n int, w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("data: {\"type\":\"RUN_STARTED\"}\n\ndata: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m1\"}\n\ndata: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m1\",\"delta\":\"half an answer\"}\n\n"))
		},
		code: agui.CodeUpstreamDisconnected, msg: "The AG-UI agent's stream ended before the run finished.",
	}, {
		// A STATE_DELTA over the 1 MiB an event may hold: the log refuses
		// it, and the run must not end as if the state had been kept.
		name: "an event too large to store",
		handle: func(n int, w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			big := `[{"op":"add","path":"/notes","value":"` + strings.Repeat("v", 2<<20) + `"}]`
			_, _ = w.Write([]byte("data: {\"type\":\"RUN_STARTED\"}\n\ndata: {\"type\":\"STATE_SNAPSHOT\",\"snapshot\":{}}\n\n" +
				"data: {\"type\":\"STATE_DELTA\",\"delta\":" + big + "}\n\ndata: {\"type\":\"RUN_FINISHED\"}\n\n"))
		},
		code: agui.CodeUpstreamError, msg: "The AG-UI agent sent an event Tether could not store (too_large).",
	}, {
		name: "a dropped connection",
		handle: func(n int, w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("data: {\"type\":\"RUN_STARTED\"}\n\n"))
			w.(http.Flusher).Flush()
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		},
		code: agui.CodeUpstreamDisconnected,
	}} {
		t.Run(c.name, func(t *testing.T) {
			u := newUpstream(t, c.handle)
			w := newWorld(t, u.URL)
			snap := w.wait(t, w.start(t, "", "hi"))
			r := snap.Runs[0]
			if r.Status != tether.RunError || r.Error == nil || r.Error.Code != c.code || (c.msg != "" && r.Error.Message != c.msg) {
				t.Fatalf("run %s %+v", r.Status, r.Error)
			}
			b, _ := json.Marshal(w.thread(t))
			if bytes.Contains(b, []byte(secret)) {
				t.Fatalf("the thread holds the upstream's body: %s", b)
			}
		})
	}
}

// Cancelling a run closes the upstream request.
func TestCancelClosesUpstream(t *testing.T) {
	closed := make(chan struct{})
	u := newUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"type\":\"RUN_STARTED\"}\n\ndata: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m1\"}\n\ndata: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m1\",\"delta\":\"a\"}\n\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(closed)
	})
	w := newWorld(t, u.URL)
	id := w.start(t, "", "hi")
	testutil.Eventually(t, 10*time.Second, "the first delta", func() bool { return answer(w.thread(t)) == "a" })
	if _, err := w.e.CancelRun(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream request is still open")
	}
	snap := w.wait(t, id)
	if snap.Runs[0].Status != tether.RunCancelled || answer(snap) != "a" {
		t.Fatalf("status %s, answer %q", snap.Runs[0].Status, answer(snap))
	}
}

// What an AG-UI front end sent (metadata.ag_ui) goes upstream, and the
// thread's state and conversation with it: earlier answers with their
// tool calls and results, a frontend tool's result as a tool message.
func TestRequestCarriesTheThread(t *testing.T) {
	u := newUpstream(t, replay(t, "pydantic_tool", "pydantic_story"))
	w := newWorld(t, u.URL)
	w.wait(t, w.start(t, "", "weather in Paris"))
	meta := `{"ag_ui":{"tools":[{"name":"confirm","description":"asks","parameters":{}}],"context":[{"description":"d","value":"v"}],"forwardedProps":{"x":1},"state":{"ignored":true}}}`
	rc, err := w.e.CreateRun(context.Background(), "t1", engine.RunRequest{Agent: "research", Metadata: []byte(meta),
		Input: tether.RunInput{Messages: []tether.InputMessage{{Role: tether.RoleTool, Content: "yes", Metadata: json.RawMessage(`{"tool_call_id":"call_front"}`)}}}})
	if err != nil {
		t.Fatal(err)
	}
	w.wait(t, rc.Run.ID)
	body := u.requests()[1]
	for k, want := range map[string]string{
		"tools": `[{"description":"asks","name":"confirm","parameters":{}}]`, "context": `[{"description":"d","value":"v"}]`,
		"forwardedProps": `{"x":1}`, "state": `{"ignored":true}`,
	} {
		if got, _ := json.Marshal(body[k]); string(got) != want {
			t.Errorf("%s: %s, want %s", k, got, want)
		}
	}
	msgs, _ := json.Marshal(body["messages"])
	for _, want := range []string{
		`"content":"weather in Paris"`,
		`"toolCalls":[{"function":{"arguments":"{\"city\": \"Paris\"}","name":"lookup"},"id":"call_lookup_1","type":"function"}]`,
		`{"content":"sunny in Paris","id":"call_lookup_1:result","role":"tool","toolCallId":"call_lookup_1"}`,
		`"content":"Done: lookup said sunny in Paris. "`,
		`"role":"tool","toolCallId":"call_front"`,
	} {
		if !strings.Contains(strings.ReplaceAll(string(msgs), `"id":"msg_`, `"id":"msg_`), strings.TrimSuffix(strings.TrimPrefix(want, "{"), "}")) {
			t.Errorf("messages %s\nlack %s", msgs, want)
		}
	}
}

// An upstream that keeps its connection open and sends nothing must not
// hold the run forever: past the idle timeout the request is closed and
// the run ends error (upstream_disconnected), what was streamed kept.
func TestSilentUpstream(t *testing.T) {
	closed := make(chan struct{})
	u := newUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"type\":\"RUN_STARTED\"}\n\ndata: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m1\"}\n\ndata: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m1\",\"delta\":\"a\"}\n\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(closed)
	})
	w := newWorldWith(t, agui.Options{URL: u.URL, IdleTimeout: 200 * time.Millisecond})
	snap := w.wait(t, w.start(t, "", "hi"))
	if r := snap.Runs[0]; r.Status != tether.RunError || r.Error == nil || r.Error.Code != agui.CodeUpstreamDisconnected || !strings.Contains(r.Error.Message, "sent nothing") {
		t.Fatalf("run %s %+v", r.Status, r.Error)
	}
	if answer(snap) != "a" {
		t.Fatalf("answer %q", answer(snap))
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream request is still open")
	}
}

// An upstream whose model names its tool calls by their index (call_0,
// as some OpenAI-compatible servers do) reuses the ids of an earlier
// run's calls. Each run's call gets an id of its own in the thread, as
// a reused message id does: AG-UI names a call by its id alone, and a
// front end given the second call under the first's id appended its
// arguments to the first call and lost the second run's message.
func TestToolCallIDsReusedAcrossRuns(t *testing.T) {
	u := newUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"type\":\"RUN_STARTED\"}\n\n" +
			"data: {\"type\":\"TOOL_CALL_START\",\"toolCallId\":\"call_0\",\"toolCallName\":\"lookup\"}\n\n" +
			"data: {\"type\":\"TOOL_CALL_ARGS\",\"toolCallId\":\"call_0\",\"delta\":\"{}\"}\n\n" +
			"data: {\"type\":\"TOOL_CALL_END\",\"toolCallId\":\"call_0\"}\n\n" +
			"data: {\"type\":\"TOOL_CALL_RESULT\",\"messageId\":\"r\",\"toolCallId\":\"call_0\",\"content\":\"sunny\"}\n\n" +
			"data: {\"type\":\"RUN_FINISHED\"}\n\n"))
	})
	w := newWorld(t, u.URL)
	for i := 0; i < 2; i++ {
		if snap := w.wait(t, w.start(t, "", "weather?")); snap.Runs[0].Status != tether.RunDone {
			t.Fatalf("run %d: %s %+v", i, snap.Runs[0].Status, snap.Runs[0].Error)
		}
	}
	calls := map[string]bool{}
	for _, m := range w.thread(t).Messages {
		for _, p := range m.Parts {
			if p.Type != tether.PartTool {
				continue
			}
			if calls[p.CallID] || string(p.Output) != `"sunny"` {
				t.Fatalf("call %s (output %s) again in message %s", p.CallID, p.Output, m.ID)
			}
			calls[p.CallID] = true
		}
	}
	if len(calls) != 2 {
		t.Fatalf("calls %v", calls)
	}
}
