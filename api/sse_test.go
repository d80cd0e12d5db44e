package api_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

func TestRunStreamFrames(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.thread("t1")
	body := map[string]any{"agent": "demo", "input": map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}},
		"metadata": map[string]any{"demo": map[string]any{"tokens": 20, "delay_ms": 1}}}
	s := v.sse("POST", "/v1/threads/t1/runs/stream", body)
	h := s.res.Header
	if h.Get("Content-Type") != "text/event-stream" || h.Get("Cache-Control") != "no-cache, no-transform" || h.Get("X-Accel-Buffering") != "no" {
		t.Fatalf("headers: %v", h)
	}
	loc, cloc := h.Get("Location"), h.Get("Content-Location")
	if !strings.HasPrefix(cloc, "/v1/runs/run_") || loc != cloc+"/events" {
		t.Fatalf("Location %q, Content-Location %q", loc, cloc)
	}
	frames := s.all()
	if !frames[0].comment {
		t.Fatalf("first frame is not the :ok comment: %+v", frames[0])
	}
	if frames[1].event != "connected" {
		t.Fatalf("second frame: %+v", frames[1])
	}
	var conn struct {
		ThreadID    string `json:"thread_id"`
		RunID       string `json:"run_id"`
		HeartbeatMs int64  `json:"heartbeat_ms"`
		ServerTime  string `json:"server_time"`
	}
	json.Unmarshal([]byte(frames[1].data), &conn)
	if conn.ThreadID != "t1" || "/v1/runs/"+conn.RunID != cloc || conn.HeartbeatMs != 15000 || conn.ServerTime == "" {
		t.Fatalf("connected: %s", frames[1].data)
	}
	evs := eventFrames(frames)
	if evs[0].event != "run.created" || evs[len(evs)-1].event != "run.finished" {
		t.Fatalf("events from %s to %s", evs[0].event, evs[len(evs)-1].event)
	}
	if last := frames[len(frames)-1]; last.event != "end" || last.data != `{"reason":"run_finished"}` {
		t.Fatalf("the stream did not end with an end frame: %+v", last)
	}
	prev := tether.OffsetStart
	var text strings.Builder
	for _, f := range evs {
		var ev tether.Event
		if err := json.Unmarshal([]byte(f.data), &ev); err != nil {
			t.Fatal(err)
		}
		if string(ev.Offset) != f.id || ev.Type != f.event || !ev.Offset.After(prev) {
			t.Fatalf("frame id %s event %s, data offset %s type %s (previous %s)", f.id, f.event, ev.Offset, ev.Type, prev)
		}
		prev = ev.Offset
		if ev.Type == tether.EventTextDelta {
			text.WriteString(ev.Delta)
		}
	}
	var fa tether.FinalAnswer
	v.mustDo(200, "GET", "/v1/threads/t1/final-answer", nil).json(&fa)
	if fa.Content != text.String() {
		t.Fatalf("streamed %q, final answer %q", text.String(), fa.Content)
	}
}

func TestStreamResume(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.thread("t1")
	id := v.demoRun("t1", `{"tokens":30,"delay_ms":2}`)
	v.waitRun(id, tether.RunDone)
	full := eventFrames(v.sse("GET", "/v1/runs/"+id+"/events?after=-1", nil).all())
	if full[len(full)-1].event != "run.finished" {
		t.Fatalf("run stream did not end with run.finished")
	}
	// Resume from every point: Last-Event-ID wins over ?after.
	for i := 0; i < len(full); i += 7 {
		got := eventFrames(v.sse("GET", "/v1/runs/"+id+"/events?after=-1", nil, "Last-Event-ID", full[i].id).all())
		if len(got) != len(full)-i-1 {
			t.Fatalf("resume after %d: %d events, want %d", i, len(got), len(full)-i-1)
		}
		for j := range got {
			if got[j].id != full[i+1+j].id {
				t.Fatalf("resume after %d: event %d is %s, want %s", i, j, got[j].id, full[i+1+j].id)
			}
		}
	}
	// No cursor: a snapshot; the run is finished, so the stream ends there.
	fs := v.sse("GET", "/v1/runs/"+id+"/events", nil).all()
	if len(fs) != 4 || fs[2].event != "snapshot" || fs[2].id == "" || fs[3].event != "end" || fs[3].data != `{"reason":"run_finished"}` {
		t.Fatalf("snapshot stream: %+v", fs)
	}
	// An unknown cursor: a reset snapshot.
	fs = v.sse("GET", "/v1/threads/t1/events?after="+string(tether.FormatOffset(1, 123456789)), nil).next2(t, 3)
	var snap tether.Snapshot
	json.Unmarshal([]byte(fs[2].data), &snap)
	if fs[2].event != "snapshot" || !snap.Reset {
		t.Fatalf("unknown cursor: %+v", fs[2])
	}
}

// next2 reads n frames and closes the stream.
func (s *sseStream) next2(t *testing.T, n int) []frame {
	t.Helper()
	var out []frame
	for len(out) < n {
		f, err := s.next()
		if err != nil {
			t.Fatalf("stream ended after %d frames", len(out))
		}
		out = append(out, f)
	}
	s.close()
	return out
}

func TestThreadStreamLive(t *testing.T) {
	v := newEnv(t, api.Options{Heartbeat: 50 * time.Millisecond})
	v.thread("t1")
	s := v.sse("GET", "/v1/threads/t1/events", nil)
	first := s.next2noclose(t, 3) // :ok, connected, snapshot
	if first[2].event != "snapshot" || first[2].id != "-1" {
		t.Fatalf("snapshot of an empty thread: %+v", first[2])
	}
	id := v.demoRun("t1", `{"tokens":10,"delay_ms":1}`)
	pings, finished := 0, false
	for !finished || pings == 0 {
		f, err := s.next()
		if err != nil {
			t.Fatal("thread stream ended")
		}
		switch f.event {
		case "ping":
			pings++
			if !strings.Contains(f.data, `"ts"`) || f.id != "" {
				t.Fatalf("ping: %+v", f)
			}
		case "run.finished":
			finished = strings.Contains(f.data, id)
		}
	}
	s.close()
}

func (s *sseStream) next2noclose(t *testing.T, n int) []frame {
	t.Helper()
	var out []frame
	for len(out) < n {
		f, err := s.next()
		if err != nil {
			t.Fatalf("stream ended after %d frames", len(out))
		}
		out = append(out, f)
	}
	return out
}

func TestStreamLifetimeAndShutdown(t *testing.T) {
	v := newEnv(t, api.Options{MaxStreamLifetime: 100 * time.Millisecond})
	v.thread("t1")
	fs := v.sse("GET", "/v1/threads/t1/events", nil).all()
	last := fs[len(fs)-1]
	if last.event != "reconnect" || !strings.Contains(last.data, "max_lifetime") {
		t.Fatalf("last frame: %+v", last)
	}

	w := newEnv(t, api.Options{})
	w.thread("t1")
	s := w.sse("GET", "/v1/threads/t1/events", nil)
	s.next2noclose(t, 3)
	done := make(chan []frame)
	go func() { done <- s.all() }()
	w.srv.Shutdown()
	select {
	case rest := <-done:
		if len(rest) == 0 || rest[len(rest)-1].event != "reconnect" || !strings.Contains(rest[len(rest)-1].data, "shutdown") {
			t.Fatalf("frames at shutdown: %+v", rest)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("stream still open after Shutdown")
	}
}

func TestLongPoll(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.thread("t1")
	type page struct {
		Events   []tether.Event `json:"events"`
		Next     tether.Offset  `json:"next_offset"`
		UpToDate bool           `json:"up_to_date"`
	}
	var p page
	v.mustDo(200, "GET", "/v1/threads/t1/events", nil, "Accept", "application/json").json(&p)
	if len(p.Events) != 0 || !p.UpToDate || p.Next != tether.OffsetStart {
		t.Fatalf("empty thread: %+v", p)
	}
	// A long poll is answered when the first event lands.
	got := make(chan page, 1)
	go func() {
		var q page
		v.mustDo(200, "GET", "/v1/threads/t1/events?wait=10000&after=-1", nil, "Accept", "application/json").json(&q)
		got <- q
	}()
	time.Sleep(50 * time.Millisecond)
	id := v.demoRun("t1", `{"tokens":5,"delay_ms":0}`)
	q := <-got
	if len(q.Events) == 0 || q.Events[0].Type != tether.EventRunCreated {
		t.Fatalf("long poll: %+v", q)
	}
	v.waitRun(id, tether.RunDone)
	// Catch-up from the start, then from next_offset, until up to date.
	var all []tether.Event
	cursor := "-1"
	for i := 0; ; i++ {
		var p page
		v.mustDo(200, "GET", "/v1/runs/"+id+"/events?after="+cursor, nil, "Accept", "application/json").json(&p)
		all = append(all, p.Events...)
		cursor = string(p.Next)
		if p.UpToDate || i > 50 {
			break
		}
	}
	if all[len(all)-1].Type != tether.EventRunFinished {
		t.Fatalf("catch-up ended with %s", all[len(all)-1].Type)
	}
	// A wait that times out answers with no events.
	start := time.Now()
	v.mustDo(200, "GET", "/v1/threads/t1/events?wait=100&after="+cursor, nil, "Accept", "application/json").json(&p)
	if len(p.Events) != 0 || time.Since(start) < 90*time.Millisecond {
		t.Fatalf("timed-out poll: %+v after %v", p, time.Since(start))
	}
}

// A stream that keeps up gets an event as large as --max-event allows (1
// MiB, more than a subscriber's buffer once its offset is counted) like
// any other, without being cut slow_consumer: every reader of the thread
// was cut, and reconnected, at each such append.
func TestStreamTakesLargestEvent(t *testing.T) {
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	v.thread("t1")
	run, lease := v.extRun("t1")
	s := v.sse("GET", "/v1/threads/t1/events?after=now", nil)
	s.next2noclose(t, 2) // :ok, connected
	testutil.Eventually(t, 5*time.Second, "the stream's subscription", func() bool { return v.e.Hub().Stats().Subscribers == 1 })
	big := `[{"type":"text.delta","message_id":"a1","delta":"` + strings.Repeat("x", 1<<20-200) + `"}]`
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", big, lease...)
	for {
		f, err := s.next()
		if err != nil {
			t.Fatal("the stream ended")
		}
		if f.event == "ping" {
			continue
		}
		if f.event != "text.delta" || len(f.data) < 1<<20-200 {
			t.Fatalf("frame %q %.100s, want the event", f.event, f.data)
		}
		break
	}
}
