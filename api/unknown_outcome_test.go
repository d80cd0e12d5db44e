package api_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// lostAnswerStore commits every batch, but answers the next one that
// holds an event of type lose (or creates a thread, for "create") with
// ErrUnavailable: a write that landed whose outcome the server could not
// learn, as a JetStream publish whose ack timed out.
type lostAnswerStore struct {
	store.Store
	lose atomic.Pointer[string]
}

func (s *lostAnswerStore) loseNext(typ string) { s.lose.Store(&typ) }

func (s *lostAnswerStore) Commit(ctx context.Context, b *store.Batch) (*store.Result, error) {
	res, err := s.Store.Commit(ctx, b)
	if err != nil {
		return res, err
	}
	if typ := s.lose.Load(); typ != nil && (*typ == "create" && b.Create ||
		slices.ContainsFunc(b.Events, func(e *tether.Event) bool { return e.Type == *typ })) {
		s.lose.Store(nil)
		return nil, store.ErrUnavailable
	}
	return res, nil
}

// waitingRun starts a run of the worker agent "ext" on a new thread tid
// and makes it wait on request q1; it returns the run id and the lease
// header.
func (v *env) waitingRun(tid string) (string, []string) {
	v.t.Helper()
	v.thread(tid)
	run, lease := v.extRun(tid)
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"run.waiting","request":{"id":"q1","kind":"input"}}]`, lease...)
	return run, lease
}

// inputsOf returns the run.input events of a thread's log.
func (v *env) inputsOf(tid string) []tether.Event {
	var out []tether.Event
	for _, raw := range v.readLog(tid) {
		var e tether.Event
		if err := json.Unmarshal(raw, &e); err != nil {
			v.t.Fatal(err)
		}
		if e.Type == tether.EventRunInput {
			out = append(out, e)
		}
	}
	return out
}

// A client that sent an answer and got 503 (its outcome unknown) sends it
// again: the answer had landed, and the repeat is that same answer, 202
// with the run, not a 409 that says the run no longer waits. Nothing is
// appended twice. The same request answered with another value is still
// a conflict. Before, the repeat got 409 conflict, which the client took
// for a failure although its answer was taken.
func TestInputRepeatedAfterLostAnswer(t *testing.T) {
	st := &lostAnswerStore{Store: testutil.OpenStore(t, "")}
	v := newEnvStore(t, st, api.Options{}, engine.Options{})
	run, _ := v.waitingRun("t1")

	st.loseNext(tether.EventRunInput)
	answer := `{"request_id":"q1","value":{"pick":"b"}}`
	if r := v.do("POST", "/v1/runs/"+run+"/input", answer); r.status != 503 || r.code() != "unavailable" {
		t.Fatalf("answer whose outcome is lost: %d %s, want 503 unavailable", r.status, r.body)
	}
	var got tether.Run
	v.mustDo(202, "POST", "/v1/runs/"+run+"/input", `{"request_id":"q1","value":{ "pick": "b" }}`).json(&got)
	if got.ID != run || got.Status != tether.RunRunning {
		t.Fatalf("the repeat answered run %+v, want %s running", got, run)
	}
	if in := v.inputsOf("t1"); len(in) != 1 {
		t.Fatalf("%d run.input events, want 1: %+v", len(in), in)
	}
	if r := v.do("POST", "/v1/runs/"+run+"/input", `{"request_id":"q1","value":{"pick":"c"}}`); r.status != 409 || r.code() != "conflict" {
		t.Fatalf("another answer to the answered request: %d %s, want 409 conflict", r.status, r.body)
	}
	if r := v.do("POST", "/v1/runs/"+run+"/input", `{"request_id":"q2","value":{"pick":"b"}}`); r.status != 409 {
		t.Fatalf("an answer to a request never asked: %d %s, want 409", r.status, r.body)
	}
}

// A worker may not ask again with the id of a request its run already
// asked: a client's repeat of its answer to the first would be taken for
// the answer to the second. Before, the worker's second run.waiting q1
// was accepted and the client's repeat of "yes" answered the new
// question, which the person never saw.
func TestRequestIDNotAskedTwice(t *testing.T) {
	st := &lostAnswerStore{Store: testutil.OpenStore(t, "")}
	v := newEnvStore(t, st, api.Options{}, engine.Options{})
	run, lease := v.waitingRun("t1")
	st.loseNext(tether.EventRunInput)
	v.mustDo(503, "POST", "/v1/runs/"+run+"/input", `{"request_id":"q1","value":"yes"}`)

	r := v.do("POST", "/v1/runs/"+run+"/events", `[{"type":"run.waiting","request":{"id":"q1","kind":"input"}}]`, lease...)
	if r.status != 409 || r.code() != "conflict" || !strings.Contains(string(r.body), "q1") {
		t.Fatalf("a request id asked again: %d %s, want 409 conflict naming q1", r.status, r.body)
	}
	v.mustDo(202, "POST", "/v1/runs/"+run+"/input", `{"request_id":"q1","value":"yes"}`)
	if in := v.inputsOf("t1"); len(in) != 1 {
		t.Fatalf("%d run.input events, want 1: %+v", len(in), in)
	}
	// A new id is asked and answered as ever.
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"run.waiting","request":{"id":"q2","kind":"input"}}]`, lease...)
	v.mustDo(202, "POST", "/v1/runs/"+run+"/input", `{"request_id":"q2","value":"yes"}`)
	if in := v.inputsOf("t1"); len(in) != 2 {
		t.Fatalf("%d run.input events, want 2: %+v", len(in), in)
	}
}

// A run that finished after the answer was taken still recognises a
// repeat of it (a demo run goes on at once).
func TestInputRepeatedAfterRunFinished(t *testing.T) {
	st := &lostAnswerStore{Store: testutil.OpenStore(t, "")}
	v := newEnvStore(t, st, api.Options{}, engine.Options{})
	run, lease := v.waitingRun("t1")
	st.loseNext(tether.EventRunInput)
	v.mustDo(503, "POST", "/v1/runs/"+run+"/input", `{"request_id":"q1","value":true}`)
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"run.finished","status":"done"}]`, lease...)
	var got tether.Run
	v.mustDo(202, "POST", "/v1/runs/"+run+"/input", `{"request_id":"q1","value":true}`).json(&got)
	if got.Status != tether.RunDone {
		t.Fatalf("run %+v, want done", got)
	}
}

// A thread created with an id, whose creation landed but was answered
// 503, is answered 200 with the thread when created again: a thread id
// the client chose makes the create a create-if-absent.
func TestThreadCreateRepeatedAfterLostAnswer(t *testing.T) {
	st := &lostAnswerStore{Store: testutil.OpenStore(t, "")}
	v := newEnvStore(t, st, api.Options{}, engine.Options{})
	st.loseNext("create")
	v.mustDo(503, "POST", "/v1/threads", `{"id":"t1","metadata":{"k":1}}`)
	var th tether.Thread
	v.mustDo(200, "POST", "/v1/threads", `{"id":"t1","metadata":{"k":1}}`).json(&th)
	if th.ID != "t1" {
		t.Fatalf("thread %+v", th)
	}
}

// useChat's answer to a request (a dynamic tool's output) sent again, as
// after a lost answer, is the answer it repeats: 200 with the run's stream
// again, one run.input in the log. Before, the second POST was refused
// 409 conflict, the run having gone on.
func TestAISDKAnswerSentAgain(t *testing.T) {
	v := newEnv(t, api.Options{})
	parseUI(t, string(v.mustDo(200, "POST", chatAPI, chatBody("chat5", []any{userMsg("u1", "ask")}, `{"tokens":3,"delay_ms":0,"ask":true}`)).body))
	var msgs []map[string]any
	v.mustDo(200, "GET", chatAPI+"/chat5/messages", nil).json(&msgs)
	answer := msgs[1]
	parts := answer["parts"].([]any)
	req := parts[len(parts)-1].(map[string]any)
	req["state"], req["output"] = "output-available", "durability"
	body := map[string]any{"id": "chat5", "messages": []any{userMsg("u1", "ask"), answer}, "trigger": "submit-message"}
	for i := range 2 {
		frames := parseUI(t, string(v.mustDo(200, "POST", chatAPI, body).body))
		if frames[len(frames)-1].chunk["type"] != "finish" {
			t.Fatalf("answer %d: the stream ends with %s", i, frames[len(frames)-1].raw)
		}
	}
	if in := v.inputsOf("chat5"); len(in) != 1 {
		t.Fatalf("%d run.input events, want 1", len(in))
	}
}
