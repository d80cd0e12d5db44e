package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agui/aguitest"
	"github.com/tetherhq/tether/api"
)

// aguiFrame is one frame of an AG-UI stream.
type aguiFrame struct {
	id    string
	event aguitest.Event
	raw   string
}

// aguiReader reads an AG-UI stream as HttpAgent does: "data:" lines, LF
// separators; comments and id lines aside.
type aguiReader struct {
	t   *testing.T
	res *http.Response
	rd  *bufio.Reader
	v   *aguitest.Verifier
}

func (v *env) agui(method, path string, body any, hdr ...string) *aguiReader {
	v.t.Helper()
	var rd io.Reader
	if body != nil {
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, v.url+path, rd)
	req.Header.Set("Accept", "text/event-stream")
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		v.t.Fatal(err)
	}
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		v.t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		v.t.Fatalf("Content-Type %q", ct)
	}
	v.t.Cleanup(func() { res.Body.Close() })
	return &aguiReader{t: v.t, res: res, rd: bufio.NewReader(res.Body), v: aguitest.NewVerifier()}
}

// next returns the next event frame, checked by the verifier; err is the
// read's error at the end (io.EOF for a clean close).
func (a *aguiReader) next() (aguiFrame, error) {
	a.t.Helper()
	var f aguiFrame
	var block []string
	for {
		line, err := a.rd.ReadString('\n')
		if err != nil {
			return f, err
		}
		if strings.Contains(line, "\r") {
			a.t.Fatalf("CR in %q", line)
		}
		line = strings.TrimSuffix(line, "\n")
		if line != "" {
			block = append(block, line)
			continue
		}
		for _, l := range block {
			switch {
			case strings.HasPrefix(l, "id: "):
				f.id = l[4:]
			case strings.HasPrefix(l, "data: "):
				f.raw = l[6:]
			case strings.HasPrefix(l, ":"):
			default:
				a.t.Fatalf("unexpected line %q", l)
			}
		}
		block = nil
		if f.raw == "" {
			continue // a comment
		}
		if err := json.Unmarshal([]byte(f.raw), &f.event); err != nil {
			a.t.Fatalf("frame %q: %v", f.raw, err)
		}
		if a.v == nil {
			return f, nil
		}
		if err := a.v.Check(f.event); err != nil {
			a.t.Fatalf("invalid AG-UI stream at %s: %v", f.raw, err)
		}
		return f, nil
	}
}

// all reads to the end and returns the frames and how the stream ended.
func (a *aguiReader) all() ([]aguiFrame, error) {
	var out []aguiFrame
	for {
		f, err := a.next()
		if err != nil {
			return out, err
		}
		out = append(out, f)
	}
}

func typeOf(f aguiFrame) string { s, _ := f.event["type"].(string); return s }

func offsetOf(f aguiFrame) string {
	md, _ := f.event["metadata"].(map[string]any)
	tm, _ := md["tether"].(map[string]any)
	s, _ := tm["offset"].(string)
	return s
}

// messages folds frames into AG-UI messages, as HttpAgent does.
func messages(frames []aguiFrame, seed ...aguitest.Event) *aguitest.Reducer {
	r := &aguitest.Reducer{Msgs: seed}
	for _, f := range frames {
		r.Apply(f.event)
	}
	return r
}

// lastAssistant is the content of the last assistant message.
func lastAssistant(r *aguitest.Reducer) string {
	for i := len(r.Msgs) - 1; i >= 0; i-- {
		if r.Msgs[i]["role"] == "assistant" {
			s, _ := r.Msgs[i]["content"].(string)
			return s
		}
	}
	return ""
}

func runInput(thread, runID, text string, demo string) map[string]any {
	return map[string]any{
		"threadId": thread, "runId": runID, "protocolVersion": "1.0", "state": map[string]any{},
		"messages":       []any{map[string]any{"id": "u-" + runID, "role": "user", "content": text}},
		"tools":          []any{map[string]any{"name": "confirm", "description": "Ask", "parameters": map[string]any{}}},
		"context":        []any{map[string]any{"description": "page", "value": "home"}},
		"forwardedProps": map[string]any{"demo": json.RawMessage(demo)},
	}
}

func (v *env) finalAnswer(thread string) tether.FinalAnswer {
	var fa tether.FinalAnswer
	v.mustDo(200, "GET", "/v1/threads/"+thread+"/final-answer", nil).json(&fa)
	return fa
}

func TestAGUIRun(t *testing.T) {
	v := newEnv(t, api.Options{})
	a := v.agui("POST", "/v1/ag-ui/demo", runInput("t1", "run-1", "what is a log?", `{"tokens":12,"delay_ms":0}`))
	frames, err := a.all()
	if err != io.EOF {
		t.Fatalf("the stream of a finished run ends cleanly: %v", err)
	}
	if typeOf(frames[0]) != "RUN_STARTED" || frames[0].event["runId"] != "run-1" || frames[0].event["threadId"] != "t1" {
		t.Fatalf("first frame %s", frames[0].raw)
	}
	last := frames[len(frames)-1]
	if typeOf(last) != "RUN_FINISHED" || last.event["runId"] != "run-1" {
		t.Fatalf("last frame %s", last.raw)
	}
	seen := map[string]bool{}
	for i, f := range frames {
		seen[typeOf(f)] = true
		if offsetOf(f) == "" {
			t.Fatalf("no offset in %s", f.raw)
		}
		// An id only on the last frame of a Tether event's frames.
		if f.id != "" && (f.id != offsetOf(f) || (i+1 < len(frames) && offsetOf(frames[i+1]) == f.id)) {
			t.Fatalf("id %q on %s", f.id, f.raw)
		}
	}
	for _, typ := range []string{"REASONING_MESSAGE_CONTENT", "TOOL_CALL_ARGS", "TOOL_CALL_RESULT", "TEXT_MESSAGE_CONTENT"} {
		if !seen[typ] {
			t.Errorf("no %s", typ)
		}
	}
	fa := v.finalAnswer("t1")
	if got := lastAssistant(messages(frames)); got != fa.Content || !fa.Complete || len(strings.Fields(got)) != 12 {
		t.Fatalf("messages end with %q, the final answer is %+v", got, fa)
	}
	// The request reached the run.
	var run struct{ Run tether.Run }
	v.mustDo(200, "GET", "/v1/runs/"+fa.RunID, nil).json(&run)
	var md struct {
		AGUI map[string]json.RawMessage `json:"ag_ui"`
		Demo map[string]any             `json:"demo"`
	}
	_ = json.Unmarshal(run.Run.Metadata, &md)
	if string(md.AGUI["runId"]) != `"run-1"` || md.AGUI["tools"] == nil || md.AGUI["context"] == nil || md.Demo["tokens"] != float64(12) {
		t.Fatalf("run metadata %s", run.Run.Metadata)
	}
	if len(run.Run.Input.Messages) != 1 || run.Run.Input.Messages[0].ID != "u-run-1" {
		t.Fatalf("input %+v", run.Run.Input)
	}

	// A retried request (same runId) streams the same run from its start.
	again, _ := v.agui("POST", "/v1/ag-ui/demo", runInput("t1", "run-1", "ignored", `{}`)).all()
	if len(again) != len(frames) {
		t.Fatalf("retry: %d frames, first time %d", len(again), len(frames))
	}
	for i := range frames {
		if offsetOf(again[i]) != offsetOf(frames[i]) || typeOf(again[i]) != typeOf(frames[i]) {
			t.Fatalf("retry frame %d: %s, first time %s", i, again[i].raw, frames[i].raw)
		}
	}

	// The next run of the conversation: HttpAgent sends every message it
	// has; those of the thread are not input again.
	next := runInput("t1", "run-2", "and now?", `{"tokens":3,"delay_ms":0}`)
	var sent []any
	for _, m := range messages(frames, aguitest.Event{"id": "u-run-1", "role": "user", "content": "what is a log?"}).Msgs {
		sent = append(sent, m)
	}
	next["messages"] = append(sent, next["messages"].([]any)...)
	if _, err := v.agui("POST", "/v1/ag-ui/demo", next).all(); err != io.EOF {
		t.Fatal(err)
	}
	v.mustDo(200, "GET", "/v1/runs/"+v.finalAnswer("t1").RunID, nil).json(&run)
	if len(run.Run.Input.Messages) != 1 || run.Run.Input.Messages[0].Content != "and now?" {
		t.Fatalf("second run's input %+v", run.Run.Input.Messages)
	}
}

func TestAGUIInterrupt(t *testing.T) {
	v := newEnv(t, api.Options{})
	frames, err := v.agui("POST", "/v1/ag-ui/demo", runInput("t1", "run-1", "summarize", `{"tokens":6,"delay_ms":0,"ask":true}`)).all()
	if err != io.EOF {
		t.Fatal(err)
	}
	last := frames[len(frames)-1].event
	outcome, _ := last["outcome"].(map[string]any)
	if outcome["type"] != "interrupt" {
		t.Fatalf("last frame %v", last)
	}
	in := outcome["interrupts"].([]any)[0].(map[string]any)
	if in["reason"] != "input" || in["message"] != "Which detail should the answer focus on?" {
		t.Fatalf("interrupt %v", in)
	}
	// The answer: a new AG-UI run (HttpAgent's fresh runId) that continues
	// the same Tether run.
	resume := runInput("t1", "run-2", "", `{}`)
	resume["messages"] = []any{}
	resume["resume"] = []any{map[string]any{"interruptId": in["id"], "status": "resolved", "payload": "latency"}}
	rest, err := v.agui("POST", "/v1/ag-ui/demo", resume).all()
	if err != io.EOF {
		t.Fatal(err)
	}
	if rest[0].event["runId"] != "run-2" || typeOf(rest[len(rest)-1]) != "RUN_FINISHED" {
		t.Fatalf("continuation %s … %s", rest[0].raw, rest[len(rest)-1].raw)
	}
	fa := v.finalAnswer("t1")
	got := lastAssistant(messages(append(frames, rest...)))
	if got != fa.Content || !strings.HasPrefix(got, "You asked me to focus on “latency”.") {
		t.Fatalf("messages end with %q, final answer %q", got, fa.Content)
	}
	var runs struct{ Runs []tether.Run }
	v.mustDo(200, "GET", "/v1/threads/t1", nil).json(&runs)
	if len(runs.Runs) != 1 {
		t.Fatalf("%d Tether runs, want the same one going on", len(runs.Runs))
	}
	// The same answer again (its POST's answer was lost) is that answer:
	// the same continuation, nothing appended. Another is a conflict.
	logLen := len(v.readLog("t1"))
	again, err := v.agui("POST", "/v1/ag-ui/demo", resume).all()
	if err != io.EOF {
		t.Fatal(err)
	}
	if len(again) != len(rest) {
		t.Fatalf("the answer sent again: %d frames, the first time %d", len(again), len(rest))
	}
	for i := range rest {
		if offsetOf(again[i]) != offsetOf(rest[i]) || typeOf(again[i]) != typeOf(rest[i]) {
			t.Fatalf("the answer sent again, frame %d: %s, the first time %s", i, again[i].raw, rest[i].raw)
		}
	}
	if n := len(v.readLog("t1")); n != logLen {
		t.Fatalf("the answer sent again appended %d events", n-logLen)
	}
	resume["resume"] = []any{map[string]any{"interruptId": in["id"], "status": "resolved", "payload": "throughput"}}
	if r := v.do("POST", "/v1/ag-ui/demo", resume); r.status != 409 {
		t.Fatalf("another answer: %d %s", r.status, r.body)
	}
}

func TestAGUIInterruptCancelled(t *testing.T) {
	v := newEnv(t, api.Options{})
	frames, _ := v.agui("POST", "/v1/ag-ui/demo", runInput("t1", "run-1", "x", `{"tokens":3,"delay_ms":0,"ask":true}`)).all()
	id := frames[len(frames)-1].event["outcome"].(map[string]any)["interrupts"].([]any)[0].(map[string]any)["id"]
	resume := runInput("t1", "run-2", "", `{}`)
	resume["resume"] = []any{map[string]any{"interruptId": id, "status": "cancelled"}}
	rest, _ := v.agui("POST", "/v1/ag-ui/demo", resume).all()
	if out := rest[len(rest)-1].event["outcome"].(map[string]any); out["type"] != "cancelled" {
		t.Fatalf("after a cancelled answer: %v", rest[len(rest)-1].raw)
	}
}

func TestAGUIErrors(t *testing.T) {
	v := newEnv(t, api.Options{})
	for _, tc := range []struct {
		path, body string
		status     int
		code       string
	}{
		{"/v1/ag-ui/demo", `{"threadId":"t1"}`, 400, "bad_request"},
		{"/v1/ag-ui/demo", `[]`, 400, "bad_request"},
		{"/v1/ag-ui/nope", `{"threadId":"t1","runId":"r1","messages":[]}`, 400, "bad_request"},
		{"/v1/ag-ui/demo", `{"threadId":"t1","runId":"r2","messages":[],"resume":[{"interruptId":"x","status":"resolved"}]}`, 409, "conflict"},
	} {
		r := v.do("POST", tc.path, tc.body)
		if r.status != tc.status || r.code() != tc.code {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, r.status, r.body)
		}
	}
	// A front end's context (CopilotKit's readables, say) over what a
	// run's metadata holds: the error says which fields, not "metadata",
	// which the request did not send.
	big := runInput("t1", "r3", "x", `{}`)
	big["context"] = []any{map[string]any{"description": "page", "value": strings.Repeat("x", 70<<10)}}
	r := v.do("POST", "/v1/ag-ui/demo", big)
	if r.status != 400 || r.code() != "bad_request" || !strings.Contains(string(r.body), "tools, context and forwardedProps") {
		t.Errorf("a context over 64 KiB: %d %s", r.status, r.body)
	}
	v.agui("POST", "/v1/ag-ui/demo", runInput("t2", "a", "x", `{"tokens":50,"delay_ms":20}`)).next()
	if r := v.do("POST", "/v1/ag-ui/demo", runInput("t2", "b", "y", `{}`)); r.status != 409 || r.code() != "run_active" {
		t.Errorf("a second run while one runs: %d %s", r.status, r.body)
	}
	v.thread("empty")
	if r := v.do("GET", "/v1/ag-ui/threads/empty/runs/current/events", nil); r.status != 204 {
		t.Errorf("current run of a thread without runs: %d %s", r.status, r.body)
	}
	if r := v.do("GET", "/v1/ag-ui/threads/empty/runs/run_x/events", nil); r.status != 404 {
		t.Errorf("unknown run: %d %s", r.status, r.body)
	}
	if r := v.do("GET", "/v1/ag-ui/threads/nope/events", nil); r.status != 404 {
		t.Errorf("unknown thread: %d %s", r.status, r.body)
	}
	if r := v.do("GET", "/v1/ag-ui/threads/empty/events?after=bad", nil); r.status != 400 {
		t.Errorf("bad cursor: %d %s", r.status, r.body)
	}
}

// TestAGUIJoin joins a run mid-flight, by the thread and by the run: the
// prelude and what follows are a valid stream that ends with the whole
// answer once.
func TestAGUIJoin(t *testing.T) {
	v := newEnv(t, api.Options{})
	post := v.agui("POST", "/v1/ag-ui/demo", runInput("t1", "run-1", "join me", `{"tokens":60,"delay_ms":5}`))
	for i := 0; i < 25; i++ {
		if _, err := post.next(); err != nil {
			t.Fatal(err)
		}
	}
	post.res.Body.Close() // the client leaves; the run goes on
	run := v.agui("GET", "/v1/ag-ui/threads/t1/runs/current/events", nil)
	thread := v.agui("GET", "/v1/ag-ui/threads/t1/events", nil)
	frames, err := run.all()
	if err != io.EOF {
		t.Fatal(err)
	}
	if typeOf(frames[0]) != "RUN_STARTED" || typeOf(frames[1]) != "MESSAGES_SNAPSHOT" {
		t.Fatalf("prelude %s %s", frames[0].raw, frames[1].raw)
	}
	fa := v.finalAnswer("t1")
	if got := lastAssistant(messages(frames)); got != fa.Content || !fa.Complete {
		t.Fatalf("joined: %q, final answer %q", got, fa.Content)
	}
	// The thread stream stays open after the run; what it had is the same.
	var tframes []aguiFrame
	for {
		f, err := thread.next()
		if err != nil {
			t.Fatal(err)
		}
		tframes = append(tframes, f)
		if typeOf(f) == "RUN_FINISHED" {
			break
		}
	}
	if got := lastAssistant(messages(tframes)); got != fa.Content {
		t.Fatalf("thread stream: %q", got)
	}
	// Joined after the end: the prelude shows the finished run.
	done, _ := v.agui("GET", "/v1/ag-ui/threads/t1/runs/"+fa.RunID+"/events", nil).all()
	if len(done) != 3 || typeOf(done[2]) != "RUN_FINISHED" || lastAssistant(messages(done)) != fa.Content {
		t.Fatalf("after the end: %d frames", len(done))
	}
}

// TestAGUIResumeFromCursor cuts a thread stream and resumes it from its
// last id, several times: the frames put together are the stream read in
// one go.
func TestAGUIResumeFromCursor(t *testing.T) {
	v := newEnv(t, api.Options{})
	if _, err := v.agui("POST", "/v1/ag-ui/demo", runInput("t1", "run-1", "first", `{"tokens":20,"delay_ms":0,"ask":true}`)).all(); err != io.EOF {
		t.Fatal(err)
	}
	whole := func() []aguiFrame {
		a := v.agui("GET", "/v1/ag-ui/threads/t1/events", nil, "Last-Event-ID", "-1")
		var out []aguiFrame
		for len(out) == 0 || typeOf(out[len(out)-1]) != "RUN_FINISHED" {
			f, err := a.next()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, f)
		}
		a.res.Body.Close()
		return out
	}()
	var got []aguiFrame
	cursor := "-1"
	check := aguitest.NewVerifier()
	for len(got) < len(whole) {
		a := v.agui("GET", "/v1/ag-ui/threads/t1/events", nil, "Last-Event-ID", cursor)
		a.v = nil // checked across the resumes, below
		for n := 0; n < 7 && len(got) < len(whole); n++ {
			f, err := a.next()
			if err != nil {
				t.Fatal(err)
			}
			if err := check.Check(f.event); err != nil {
				t.Fatalf("resumed stream: %v", err)
			}
			got = append(got, f)
			if f.id != "" {
				cursor = f.id
			}
		}
		a.res.Body.Close()
		// A resume goes on from the last id: frames of its event after it
		// come again, and are not counted twice.
		for len(got) > 0 && got[len(got)-1].id == "" {
			got = got[:len(got)-1]
		}
		check = aguitest.NewVerifier()
		for _, f := range got {
			_ = check.Check(f.event)
		}
	}
	for i := range whole {
		if got[i].raw != whole[i].raw {
			t.Fatalf("frame %d: %s, read in one go %s", i, got[i].raw, whole[i].raw)
		}
	}
	v.mustDo(202, "POST", "/v1/runs/"+v.finalAnswer("t1").RunID+"/cancel", nil)
}

// TestAGUICutIsReset: a stream the server ends mid-run (shutdown, max
// lifetime) is reset, so that HttpAgent reports an error rather than a
// run that ended well.
func TestAGUICutIsReset(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts api.Options
		cut  func(v *env)
	}{
		{"shutdown", api.Options{}, func(v *env) { go v.srv.Shutdown() }},
		{"max lifetime", api.Options{MaxStreamLifetime: 300 * time.Millisecond, Heartbeat: 50 * time.Millisecond}, func(*env) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newEnv(t, tc.opts)
			a := v.agui("POST", "/v1/ag-ui/demo", runInput("t1", "run-1", "long", `{"tokens":2000,"delay_ms":20}`))
			if _, err := a.next(); err != nil {
				t.Fatal(err)
			}
			rid := strings.TrimPrefix(a.res.Header.Get("Content-Location"), "/v1/runs/")
			defer func() { _, _ = v.e.CancelRun(context.Background(), rid) }()
			tc.cut(v)
			frames, err := a.all()
			if err == io.EOF || err == nil {
				t.Fatalf("the stream was closed cleanly after %d frames, not reset", len(frames))
			}
			if !errors.Is(err, io.ErrUnexpectedEOF) && !strings.Contains(err.Error(), "reset") {
				t.Logf("ended with %v", err)
			}
		})
	}
}

// TestAGUICutIsResetHTTP2: on HTTP/2 (no connection to take over) the cut
// is a reset of the stream (RST_STREAM), not its clean end.
func TestAGUICutIsResetHTTP2(t *testing.T) {
	v := newEnv(t, api.Options{})
	hs := httptest.NewUnstartedServer(v.srv.Handler())
	hs.EnableHTTP2 = true
	hs.StartTLS()
	defer hs.Close()
	body, _ := json.Marshal(runInput("t1", "run-1", "long", `{"tokens":2000,"delay_ms":20}`))
	req, _ := http.NewRequest("POST", hs.URL+"/v1/ag-ui/demo", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	res, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.ProtoMajor != 2 {
		t.Fatalf("HTTP/%d", res.ProtoMajor)
	}
	rid := strings.TrimPrefix(res.Header.Get("Content-Location"), "/v1/runs/")
	defer func() { _, _ = v.e.CancelRun(context.Background(), rid) }()
	rd := bufio.NewReader(res.Body)
	if _, err := rd.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	go v.srv.Shutdown()
	_, err = io.ReadAll(rd)
	if err == nil {
		t.Fatal("the stream was closed cleanly, not reset")
	}
}
