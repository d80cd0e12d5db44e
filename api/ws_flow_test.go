package api_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// Tests of resuming and of flow control on the WebSocket: many
// subscriptions dropped and resumed, slow consumers, stalled peers.
// wsFollow is what one subscription of TestWSManySubscriptions asked for
// and received.
type wsFollow struct {
	req      map[string]any // the subscribe frame, without after
	cursor   string         // its first after ("" for a snapshot)
	kind     string         // thread, run or message
	runID    string         // of a run, or of a message's run
	msgID    string
	types    []string
	start    tether.Offset // events are expected after it
	last     tether.Offset // last event received
	snapshot bool
	got      []string // events, compacted
	end      string   // reason of the end frame
}

// resume is the after of a resubscription.
func (f *wsFollow) resume() string {
	if f.last != "" {
		return string(f.last)
	}
	if f.snapshot {
		return string(f.start)
	}
	return f.cursor
}

// want filters the log as the server must: events after start, up to the
// run's or message's terminal event, of the requested types.
func (f *wsFollow) want(t *testing.T, log []json.RawMessage) []string {
	var out []string
	for _, raw := range log {
		var e tether.Event
		json.Unmarshal(raw, &e)
		match, end := true, false
		switch f.kind {
		case "run":
			match = e.RunID == f.runID
			end = match && e.Type == tether.EventRunFinished
		case "message":
			switch {
			case e.MessageID == f.msgID:
				end = e.Type == tether.EventMessageFinished || e.Type == tether.EventMessageCreated
			case e.Type == tether.EventRunFinished && e.RunID == f.runID:
				end = true
			default:
				match = false
			}
		}
		if match && e.Offset.After(f.start) && (f.types == nil || slices.Contains(f.types, e.Type)) {
			out = append(out, compact(t, raw))
		}
		if end {
			break
		}
	}
	return out
}

// TestWSManySubscriptions follows 100 subscriptions of 10 threads on one
// socket while runs stream, drops the socket halfway, resumes each one on a
// new socket from its last offset, and checks that each received exactly
// its part of the log.
func TestWSManySubscriptions(t *testing.T) {
	v := newEnv(t, api.Options{})
	const threads = 10
	const demoOpts = `{"tokens":60,"delay_ms":1}`
	follows := map[string]*wsFollow{}
	add := func(id, kind, runID, msgID, cursor string, types []string, req ...any) {
		f := &wsFollow{req: map[string]any{"op": "subscribe", "id": id}, cursor: cursor, kind: kind, runID: runID, msgID: msgID, types: types}
		for i := 0; i+1 < len(req); i += 2 {
			f.req[req[i].(string)] = req[i+1]
		}
		if types != nil {
			f.req["types"] = types
		}
		if cursor != "" {
			f.start = tether.Offset(cursor)
		}
		follows[id] = f
	}
	sendSub := func(w *wsClient, f *wsFollow, after string) {
		req := maps.Clone(f.req)
		if after != "" {
			req["after"] = after
		}
		w.send(req)
	}
	runMessages := func(runID string) []tether.Message {
		var body struct{ Messages []tether.Message }
		v.mustDo(200, "GET", "/v1/runs/"+runID, nil).json(&body)
		return body.Messages
	}
	userMsg := func(runID string) string {
		for _, m := range runMessages(runID) {
			if m.Role == tether.RoleUser {
				return m.ID
			}
		}
		t.Fatalf("run %s has no user message", runID)
		return ""
	}

	w := v.ws("")
	runs := make([][2]string, threads)
	for i := range threads {
		tid := fmt.Sprintf("t%d", i)
		v.thread(tid)
		run1 := v.demoRun(tid, demoOpts)
		var run2 tether.Run
		v.mustDo(201, "POST", "/v1/threads/"+tid+"/runs", `{"agent":"demo","multitask":"enqueue","input":{"messages":[{"role":"user","content":"more"}]},"metadata":{"demo":`+demoOpts+`}}`).json(&run2)
		runs[i] = [2]string{run1, run2.ID}
		p := tid + "-"
		add(p+"thread", "thread", "", "", "-1", nil, "thread_id", tid)
		add(p+"thread-snap", "thread", "", "", "", nil, "thread_id", tid)
		add(p+"thread-types", "thread", "", "", "-1", []string{tether.EventTextDelta, tether.EventRunFinished}, "thread_id", tid)
		add(p+"run1", "run", run1, "", "-1", nil, "thread_id", tid, "run_id", run1)
		add(p+"run2", "run", run2.ID, "", "-1", nil, "run_id", run2.ID)
		add(p+"run1-snap", "run", run1, "", "", nil, "thread_id", tid, "run_id", run1)
		add(p+"run2-types", "run", run2.ID, "", "-1", []string{tether.EventRunStarted, tether.EventMessageFinished}, "thread_id", tid, "run_id", run2.ID)
		u1, u2 := userMsg(run1), userMsg(run2.ID)
		add(p+"user1", "message", run1, u1, "-1", nil, "thread_id", tid, "message_id", u1)
		add(p+"user2", "message", run2.ID, u2, "-1", nil, "thread_id", tid, "run_id", run2.ID, "message_id", u2)
	}
	for _, f := range follows {
		sendSub(w, f, f.cursor)
	}
	// The assistant message of each first run, once it exists.
	for i := range threads {
		tid, run1 := fmt.Sprintf("t%d", i), runs[i][0]
		var id string
		testutil.Eventually(t, 10*time.Second, "an assistant message", func() bool {
			for _, m := range runMessages(run1) {
				if m.Role == tether.RoleAssistant {
					id = m.ID
				}
			}
			return id != ""
		})
		add(tid+"-answer1", "message", run1, id, "-1", nil, "thread_id", tid, "message_id", id)
		sendSub(w, follows[tid+"-answer1"], "-1")
	}
	if len(follows) != 100 {
		t.Fatalf("%d subscriptions", len(follows))
	}

	// handle applies a frame; it reports a subscription to resume.
	handle := func(m wsMsg) (resume *wsFollow) {
		t.Helper()
		f := follows[m.ID]
		if f == nil {
			t.Fatalf("frame for an unknown subscription: %s", m.raw)
		}
		if f.end != "" {
			t.Fatalf("frame after the end of %s: %s", m.ID, m.raw)
		}
		switch m.Op {
		case "subscribed":
		case "snapshot":
			if m.Reset || f.last != "" || f.cursor != "" || (f.snapshot && f.start != "" && m.Offset.Compare(f.start) < 0) {
				t.Fatalf("unexpected snapshot for %s: %s", m.ID, m.raw)
			}
			f.snapshot, f.start = true, m.Offset
		case "event":
			e := m.ev()
			if !e.Offset.After(f.last) || !e.Offset.After(f.start) {
				t.Fatalf("%s: event %s after %s (start %s)", m.ID, e.Offset, f.last, f.start)
			}
			f.last = e.Offset
			f.got = append(f.got, compact(t, m.Event))
		case "end":
			switch m.Reason {
			case "slow_consumer", "shutdown":
				return f
			case "run_finished":
				if f.kind != "run" {
					t.Fatalf("%s: %s", m.ID, m.raw)
				}
			case "message_finished":
				if f.kind != "message" {
					t.Fatalf("%s: %s", m.ID, m.raw)
				}
			default:
				t.Fatalf("%s: %s", m.ID, m.raw)
			}
			f.end = m.Reason
		default:
			t.Fatalf("unexpected frame %s", m.raw)
		}
		return nil
	}

	// Read a part of the frames, then drop the socket.
	events := 0
	for events < 2000 {
		m := w.read()
		if m.Op == "event" {
			events++
		}
		if f := handle(m); f != nil {
			sendSub(w, f, f.resume())
		}
	}
	w.c.CloseNow()

	// Resume every subscription that has not ended on a new socket.
	w = v.ws("")
	resumed := 0
	for _, f := range follows {
		if f.end == "" {
			sendSub(w, f, f.resume())
			resumed++
		}
	}
	if resumed < 30 {
		t.Fatalf("only %d subscriptions to resume", resumed)
	}
	for _, r := range runs {
		v.waitRun(r[0], tether.RunDone)
		v.waitRun(r[1], tether.RunDone)
	}
	logs := map[string][]json.RawMessage{}
	for i := range threads {
		tid := fmt.Sprintf("t%d", i)
		logs[tid] = v.readLog(tid)
	}
	// want is what a subscription must receive, once its start is known (a
	// snapshot's offset may come only now).
	wants := map[string][]string{}
	want := func(id string) ([]string, bool) {
		f := follows[id]
		if f.cursor == "" && !f.snapshot {
			return nil, false
		}
		if wants[id] == nil {
			wants[id] = f.want(t, logs[threadOf(id)])
		}
		return wants[id], true
	}
	complete := func() bool {
		for id, f := range follows {
			if f.kind != "thread" {
				if f.end == "" {
					return false
				}
			} else if w, ok := want(id); !ok || len(f.got) < len(w) {
				return false
			}
		}
		return true
	}
	for !complete() {
		if f := handle(w.read()); f != nil {
			sendSub(w, f, f.resume())
		}
	}
	for id, f := range follows {
		want(id)
		if !slices.Equal(f.got, wants[id]) {
			t.Errorf("%s: got %d events, want %d", id, len(f.got), len(wants[id]))
			for i := range max(len(f.got), len(wants[id])) {
				var g, w string
				if i < len(f.got) {
					g = f.got[i]
				}
				if i < len(wants[id]) {
					w = wants[id][i]
				}
				if g != w {
					t.Fatalf("%s: event %d is\n%s\nwant\n%s", id, i, g, w)
				}
			}
		}
		if f.kind == "thread" || f.types != nil || f.cursor == "" {
			continue
		}
		// Ends are after the terminal event: run.finished for a run, and
		// message.finished for the answer (message.created for an input).
		var lastEv tether.Event
		if len(f.got) > 0 {
			json.Unmarshal([]byte(f.got[len(f.got)-1]), &lastEv)
		}
		wantLast := map[string]string{"run": tether.EventRunFinished, "message": tether.EventMessageCreated}[f.kind]
		if strings.HasSuffix(id, "-answer1") {
			wantLast = tether.EventMessageFinished
		}
		if lastEv.Type != wantLast {
			t.Errorf("%s: ended after %q, want %s", id, lastEv.Type, wantLast)
		}
	}
	// Closing the socket ends its goroutines and engine subscriptions.
	w.c.Close(websocket.StatusNormalClosure, "")
	testutil.Eventually(t, 5*time.Second, "the socket's end", func() bool {
		m := string(v.mustDo(200, "GET", "/metrics", nil).body)
		return strings.Contains(m, "\ntether_ws_connections 0\n") && strings.Contains(m, "\ntether_subscriptions 0\n")
	})
}

// threadOf returns the thread of a subscription id of TestWSManySubscriptions.
func threadOf(id string) string { return id[:strings.IndexByte(id, '-')] }

// TestWSSlowConsumer stops reading while a worker streams: the
// subscription that falls behind ends slow_consumer with the offset to
// resume from, and the resumed subscription completes the log without a
// gap.
func TestWSSlowConsumer(t *testing.T) {
	defer api.SetWSQueueBytes(16 << 10)()
	eopts := engine.Options{}
	eopts.Hub.BufferBytes = 256 << 10
	v := newEnvEngine(t, api.Options{}, eopts)
	v.thread("t1")
	v.thread("t2")
	w := v.ws("")
	w.subscribe("s", "thread_id", "t1", "after", "now")
	start := w.expect("subscribed", "s").Offset
	w.subscribe("quiet", "thread_id", "t2", "after", "now")
	w.expect("subscribed", "quiet")

	// Batches of 64 KiB until the hub has cut the subscription: the
	// kernel's socket buffers fill, then the socket's queue, then the
	// subscription's buffer in the hub.
	run, lease := v.extRun("t1")
	v.stream(run, lease, func() bool { return v.e.Hub().Stats().Subscribers == 1 }) // quiet is left
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"message.finished","message_id":"a1","status":"done"},{"type":"run.finished","status":"done"}]`, lease...)

	var got []string
	last := start
	for {
		m := w.read()
		if m.Op == "end" {
			if m.Reason != "slow_consumer" || m.Offset != last {
				t.Fatalf("end %s after %s", m.raw, last)
			}
			break
		}
		got = append(got, string(m.Event))
		last = m.ev().Offset
	}
	w.subscribe("s", "thread_id", "t1", "after", string(last))
	w.expect("subscribed", "s")
	var want []string
	for _, raw := range v.readLog("t1") {
		var e tether.Event
		json.Unmarshal(raw, &e)
		if e.Offset.After(start) {
			want = append(want, compact(t, raw))
		}
	}
	for len(got) < len(want) {
		m := w.read()
		if m.Op != "event" {
			t.Fatalf("frame %s", m.raw)
		}
		got = append(got, string(m.Event))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	if !strings.Contains(string(v.mustDo(200, "GET", "/metrics", nil).body), "tether_slow_consumer_cuts_total 1") {
		t.Fatal("the cut is not counted")
	}
	// The subscription that kept up goes on.
	v.mustDo(201, "POST", "/v1/threads/t2/runs", `{"agent":"ext","input":{"messages":[{"role":"user","content":"hi"}]}}`)
	if m := w.expect("event", "quiet"); m.ev().Type != tether.EventRunCreated {
		t.Fatalf("quiet: %s", m.raw)
	}
}

// extRun starts a run of the agent "ext" on thread tid, claims it as a
// worker and starts its message a1; it returns the run id and lease header.
func (v *env) extRun(tid string) (string, []string) {
	v.t.Helper()
	var run tether.Run
	v.mustDo(201, "POST", "/v1/threads/"+tid+"/runs", `{"agent":"ext","input":{"messages":[{"role":"user","content":"hi"}]}}`).json(&run)
	var claim struct{ Lease struct{ Token string } }
	v.mustDo(200, "POST", "/v1/workers/claim", `{"worker_id":"w1","agents":["ext"],"wait_ms":1000}`).json(&claim)
	lease := []string{"Tether-Lease", claim.Lease.Token}
	v.mustDo(200, "POST", "/v1/runs/"+run.ID+"/events", `[{"type":"message.started","message_id":"a1","role":"assistant"}]`, lease...)
	return run.ID, lease
}

// stream appends batches of 64 KiB of text to message a1 until done
// reports true, for at most 64 MiB.
func (v *env) stream(run string, lease []string, done func() bool) {
	v.t.Helper()
	delta := `{"type":"text.delta","message_id":"a1","delta":"` + strings.Repeat("x", 8<<10) + `"}`
	batch := "[" + strings.Repeat(delta+",", 7) + delta + "]"
	for i := 0; !done(); i++ {
		if i == 1024 {
			v.t.Fatal("still not done after 64 MiB")
		}
		v.mustDo(200, "POST", "/v1/runs/"+run+"/events", batch, lease...)
	}
}

// TestWSWriteTimeout stops reading while a worker streams: once a write
// has waited for the write timeout, the server closes the socket.
func TestWSWriteTimeout(t *testing.T) {
	v := newEnvEngine(t, api.Options{WriteTimeout: 200 * time.Millisecond}, engine.Options{})
	v.thread("t1")
	w := v.ws("")
	w.subscribe("s", "thread_id", "t1", "after", "now")
	w.expect("subscribed", "s")
	run, lease := v.extRun("t1")
	v.stream(run, lease, func() bool {
		return strings.Contains(string(v.mustDo(200, "GET", "/metrics", nil).body), "\ntether_ws_connections 0\n")
	})
	for {
		if _, err := w.next(); err != nil {
			break // the events written before the cut, then the end
		}
	}
}
