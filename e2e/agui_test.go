package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/ssetest"
)

// The AG-UI agents behind Tether: the real pydantic-ai and ag-ui-langgraph
// servers of python/interop (the unmodified packages at the versions of
// python/requirements-test.txt, in the venv scripts/test makes and names
// in $TETHER_PYTHON), proxied by the real binary (--ag-ui-agent).

// pythonForInterop returns the venv's python, skipping the test when there
// is none, except in CI, where scripts/test always makes one.
func pythonForInterop(t *testing.T) string {
	t.Helper()
	py := os.Getenv("TETHER_PYTHON")
	if py == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("$TETHER_PYTHON is not set: scripts/test sets it to the venv of bash scripts/pyenv")
		}
		t.Skip("$TETHER_PYTHON is not set (run bash scripts/test, or TETHER_PYTHON=$(bash scripts/pyenv) go test ./e2e): the AG-UI interop tests need pydantic-ai and ag-ui-langgraph")
	}
	return py
}

// startAGUIAgent starts python/interop/serve.py kind and returns its URL.
// It is stopped when the test ends.
func startAGUIAgent(t *testing.T, py, kind string) string {
	t.Helper()
	dir, err := filepath.Abs("../python/interop")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "serve.py", kind)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	out := &syncBuffer{}
	cmd.Stderr = out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s agent: %v", kind, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s agent output:\n%s", kind, out.String())
		}
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		for sc.Scan() {
		}
	}()
	select {
	case l := <-line:
		url, ok := strings.CutPrefix(l, "listening ")
		if !ok {
			t.Fatalf("%s agent said %q\n%s", kind, l, out.String())
		}
		return url
	case <-time.After(60 * time.Second):
		t.Fatalf("%s agent did not start in 60s:\n%s", kind, out.String())
	}
	return ""
}

// direct runs prompt on an AG-UI agent without Tether and returns the text
// it streamed (TEXT_MESSAGE_CONTENT deltas, joined).
func direct(t *testing.T, url, threadID, prompt string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"threadId": threadID, "runId": "direct-1", "state": map[string]any{}, "tools": []any{}, "context": []any{},
		"forwardedProps": map[string]any{}, "messages": []map[string]string{{"id": "u1", "role": "user", "content": prompt}},
	})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var text strings.Builder
	r := ssetest.NewReader(res.Body)
	for {
		f, err := r.Next()
		if err != nil {
			break
		}
		var e struct{ Type, Delta string }
		if json.Unmarshal([]byte(f.Data), &e) == nil && e.Type == "TEXT_MESSAGE_CONTENT" {
			text.WriteString(e.Delta)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	return text.String()
}

// followWithCuts follows a run's events from its start and cuts the
// connection after every `every` events, `cuts` times, each time while the
// run is still going, resuming with Last-Event-ID; then it reads to the
// run's end. It returns every event it got.
func followWithCuts(t *testing.T, s *server, rid string, cuts, every int) []seenEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	var events []seenEvent
	last := ""
	made := 0
	for conn := 0; conn < 100; conn++ {
		p := "/v1/runs/" + rid + "/events"
		if last == "" {
			p += "?after=-1"
		}
		st, err := s.openStream(ctx, p, last)
		if err != nil {
			t.Fatalf("connection %d: %v", conn, err)
		}
		cutAfter := -1
		if made < cuts {
			cutAfter = every
		}
		var finished, cut bool
		events, finished, cut, err = ssetest.ReadResumed(st.Stream, events, cutAfter)
		st.close()
		if err != nil {
			t.Fatalf("connection %d: %v", conn, err)
		}
		if cut {
			made++
		}
		if finished {
			if made < cuts {
				t.Fatalf("the run ended after %d cuts, before the %d the test makes: make its answer longer", made, cuts)
			}
			return events
		}
		if n := len(events); n > 0 {
			last = events[n-1].Offset
		}
	}
	t.Fatal("no run.finished after 100 connections")
	return nil
}

func deltas(events []seenEvent) string {
	var b strings.Builder
	for _, e := range events {
		if e.Type == tether.EventTextDelta {
			var d struct{ Delta string }
			_ = json.Unmarshal(e.Data, &d)
			b.WriteString(d.Delta)
		}
	}
	return b.String()
}

func TestAGUIPydanticAI(t *testing.T) {
	py := pythonForInterop(t)
	up := startAGUIAgent(t, py, "pydantic")
	s := start(t, "", "--ag-ui-agent", "pyd="+up)

	t.Run("an answer through five cuts", func(t *testing.T) {
		want := direct(t, up, "direct", "story 100")
		if !strings.HasPrefix(want, "word0 word1 ") || !strings.HasSuffix(want, " word99") {
			t.Fatalf("pydantic-ai answered %q", want)
		}
		tid := s.createThread(t)
		r := s.createRun(t, tid, "pyd", "story 100", "")
		events := followWithCuts(t, s, r.ID, 5, 8)
		sameSequence(t, "the cut client", events, s.readLog(t, "/v1/runs/"+r.ID+"/events"))
		fa := s.finalAnswer(t, tid)
		if fa.Status != "done" || !fa.Complete || fa.Content != want || deltas(events) != want {
			t.Fatalf("final answer %+v, streamed %q, want %q", fa, deltas(events), want)
		}
	})

	t.Run("a tool call", func(t *testing.T) {
		tid := s.createThread(t)
		r := s.waitRunEnded(t, s.createRun(t, tid, "pyd", "weather in Paris", "").ID)
		_, msgs := s.getRun(t, r.ID)
		var tool *tether.Part
		for i := range msgs {
			for j := range msgs[i].Parts {
				if p := &msgs[i].Parts[j]; p.Type == tether.PartTool {
					tool = p
				}
			}
		}
		if r.Status != tether.RunDone || tool == nil || tool.Name != "lookup" || tool.Status != tether.ToolDone ||
			string(tool.Input) != `{"city":"Paris"}` || string(tool.Output) != `"sunny in Paris"` {
			t.Fatalf("run %s (error %+v), tool %+v", r.Status, r.Error, tool)
		}
		if fa := s.finalAnswer(t, tid); fa.Content != "Done: lookup said sunny in Paris. " {
			t.Fatalf("final answer %q", fa.Content)
		}
	})

	t.Run("an approval interrupt resumed", func(t *testing.T) {
		tid := s.createThread(t)
		rid := s.createRun(t, tid, "pyd", "delete notes", "").ID
		var r tether.Run
		eventually(t, 60*time.Second, "the run to wait", func() bool {
			r, _ = s.getRun(t, rid)
			return r.Status == tether.RunWaiting || r.Status.Terminal()
		})
		if r.Status != tether.RunWaiting || r.Request == nil || r.Request.Kind != "ag-ui.interrupt" ||
			!strings.Contains(string(r.Request.Payload), `"reason":"tool_call"`) {
			t.Fatalf("run %s %+v", r.Status, r.Request)
		}
		value := fmt.Sprintf(`{"resume":[{"interruptId":%q,"status":"resolved","payload":{"approved":true}}]}`, r.Request.ID)
		s.mustCall(http.MethodPost, "/v1/runs/"+rid+"/input", map[string]any{"request_id": r.Request.ID, "value": json.RawMessage(value)}, http.StatusAccepted, nil)
		r = s.waitRunEnded(t, rid)
		if fa := s.finalAnswer(t, tid); r.Status != tether.RunDone || fa.Content != "Done: delete_file said deleted notes.txt. " {
			t.Fatalf("run %s %+v, final answer %q", r.Status, r.Error, fa.Content)
		}
	})

	// Last: it restarts the server. The upstream request dies with the
	// process; the run ends aborted like any in-process run's.
	defer t.Run("a restart aborts the run", func(t *testing.T) {
		tid := s.createThread(t)
		rid := s.createRun(t, tid, "pyd", "story 400", "").ID
		eventually(t, 60*time.Second, "the answer to start", func() bool { return s.finalAnswer(t, tid).Content != "" })
		s.kill9()
		s.restart()
		r := s.waitRunEnded(t, rid)
		if r.Status != tether.RunAborted || r.Error == nil || r.Error.Code != "server_restart" {
			t.Fatalf("run %s %+v", r.Status, r.Error)
		}
		if fa := s.finalAnswer(t, tid); !strings.HasPrefix(fa.Content, "word0 ") {
			t.Fatalf("what was streamed before the restart is lost: %q", fa.Content)
		}
	})

	t.Run("a model error", func(t *testing.T) {
		tid := s.createThread(t)
		r := s.waitRunEnded(t, s.createRun(t, tid, "pyd", "fail now", "").ID)
		if r.Status != tether.RunError || r.Error == nil || r.Error.Code != "agent_error" || r.Error.Message != "the model is down" {
			t.Fatalf("run %s %+v", r.Status, r.Error)
		}
	})
}

func TestAGUILangGraph(t *testing.T) {
	py := pythonForInterop(t)
	up := startAGUIAgent(t, py, "langgraph")
	s := start(t, "", "--ag-ui-agent", "graph="+up)

	want := direct(t, up, "direct", "story 60")
	if !strings.HasPrefix(want, "word0 word1 ") || !strings.HasSuffix(want, " word59") {
		t.Fatalf("the graph answered %q", want)
	}
	tid := s.createThread(t)
	r := s.createRun(t, tid, "graph", "story 60", "")
	events := followWithCuts(t, s, r.ID, 5, 8)
	sameSequence(t, "the cut client", events, s.readLog(t, "/v1/runs/"+r.ID+"/events"))
	if fa := s.finalAnswer(t, tid); fa.Status != "done" || fa.Content != want || deltas(events) != want {
		t.Fatalf("final answer %+v, streamed %q, want %q", fa, deltas(events), want)
	}
	kinds := map[string]int{}
	for _, e := range events {
		var c struct{ Name string }
		_ = json.Unmarshal(e.Data, &c)
		kinds[e.Type+" "+c.Name]++
	}
	for _, k := range []string{"state.snapshot ", "custom ag-ui.STEP_STARTED", "custom ag-ui.STEP_FINISHED", "custom ag-ui.RAW", "custom ag-ui.MESSAGES_SNAPSHOT"} {
		if kinds[k] == 0 {
			t.Errorf("the client got no %s: %v", k, kinds)
		}
	}

	// The graph's state is the thread's, in every snapshot, and lives on
	// into the next run.
	r2 := s.waitRunEnded(t, s.createRun(t, tid, "graph", "story 3", "").ID)
	if r2.Status != tether.RunDone {
		t.Fatalf("second run %s %+v", r2.Status, r2.Error)
	}
	var snap struct {
		State struct {
			Steps    []string          `json:"steps"`
			Count    int               `json:"count"`
			Messages []json.RawMessage `json:"messages"`
		} `json:"state"`
	}
	s.mustCall(http.MethodGet, "/v1/threads/"+tid, nil, http.StatusOK, &snap)
	if snap.State.Count != 2 || strings.Join(snap.State.Steps, ",") != "plan,answer,plan,answer" || len(snap.State.Messages) != 4 {
		t.Fatalf("state %+v", snap.State)
	}
	st, err := s.openStream(t.Context(), "/v1/threads/"+tid+"/events", "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	for {
		f, err := st.next()
		if err != nil {
			t.Fatal(err)
		}
		if f.Event == "snapshot" {
			if !strings.Contains(f.Data, `"state":{`) || !strings.Contains(f.Data, `"count":2`) {
				t.Fatalf("the SSE snapshot has no state: %.300s", f.Data)
			}
			break
		}
	}
}
