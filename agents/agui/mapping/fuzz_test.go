package mapping

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/runs"
)

// FuzzMapping maps arbitrary event sequences (one event per line). Whatever
// they are, mapping never panics, and every Tether event it makes is one
// the state machine accepts: an upstream can end a run with an error, never
// make Tether refuse what it was told to append.
func FuzzMapping(f *testing.F) {
	files, _ := filepath.Glob("../testdata/*.sse")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		var lines []string
		for _, l := range strings.Split(string(data), "\n") {
			if d, ok := strings.CutPrefix(l, "data: "); ok {
				lines = append(lines, d)
			}
		}
		f.Add([]byte(strings.Join(lines, "\n")))
	}
	f.Add([]byte(`{"type":"RUN_STARTED"}
{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"a"}
{"type":"TOOL_CALL_CHUNK","toolCallId":"c","toolCallName":"f","parentMessageId":"m","delta":"{"}
{"type":"TOOL_CALL_RESULT","toolCallId":"c","messageId":"r","content":"x"}
{"type":"STATE_SNAPSHOT","snapshot":{"a":[]}}
{"type":"STATE_DELTA","delta":[{"op":"add","path":"/a/-","value":1}]}
{"type":"RUN_FINISHED","outcome":{"type":"interrupt","interrupts":[{"id":"i"}]}}
{"type":"RUN_STARTED"}
{"type":"TEXT_MESSAGE_START","messageId":"m"}
{"type":"RUN_FINISHED"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		foldMapped(t, data)
	})
}

// foldMapped maps the lines of data and folds what comes out into a
// State; it fails the test if the State refuses an event.
func foldMapped(t *testing.T, data []byte) {
	s := runs.NewState(tether.Thread{ID: "t1", Metadata: json.RawMessage(`{}`)})
	n := 0
	apply := func(e *tether.Event) {
		n++
		e.RunID = "run1"
		e.TS = tether.At(time.Unix(int64(n), 0))
		e.Offset = tether.FormatOffset(1, uint64(n))
		// As a write checks it (a Tx: the limits on what a write may add,
		// which folding a stored log does not apply), then folded.
		if err := s.Machine().Begin().Apply(e); err != nil {
			b, _ := json.Marshal(e)
			t.Fatalf("a write would refuse %s: %v", b, err)
		}
		if err := s.Apply(e); err != nil {
			b, _ := json.Marshal(e)
			t.Fatalf("the state machine refused %s: %v", b, err)
		}
	}
	apply(&tether.Event{Type: tether.EventRunCreated, Run: &tether.Run{ID: "run1", ThreadID: "t1", Status: tether.RunPending}})
	apply(&tether.Event{Type: tether.EventMessageCreated, Message: &tether.Message{ID: "u1", Role: tether.RoleUser}})
	apply(&tether.Event{Type: tether.EventRunStarted, WorkerID: "w"})
	m := New(Options{RunID: "run1", Sent: json.RawMessage(`{}`), Taken: func(id string) bool { return id == "u1" }})
	for _, line := range bytes.Split(data, []byte("\n")) {
		evs, err := m.Event(line)
		if err != nil {
			if !IsMalformed(err) {
				t.Fatalf("an error that is not about the upstream: %v", err)
			}
			return
		}
		for _, e := range evs {
			apply(e)
		}
		if rq := m.Waiting(); rq != nil {
			apply(&tether.Event{Type: tether.EventRunWaiting, Request: rq})
			apply(&tether.Event{Type: tether.EventRunInput, RequestID: rq.ID, Value: json.RawMessage(`{}`)})
			m.Resume()
			continue
		}
		if m.Ended() {
			return
		}
	}
	if got, want := string(s.Snapshot().State), string(m.State()); got != want {
		t.Fatalf("the thread's state is %s, the Mapper's %s", got, want)
	}
}

// The recorded streams of the real agents fold without a refusal.
func TestRecordedStreamsFold(t *testing.T) {
	files, _ := filepath.Glob("../testdata/*.sse")
	if len(files) < 6 {
		t.Fatalf("%d recorded streams", len(files))
	}
	for _, name := range files {
		data, _ := os.ReadFile(name)
		var lines []string
		for _, l := range strings.Split(string(data), "\n") {
			if d, ok := strings.CutPrefix(l, "data: "); ok {
				lines = append(lines, d)
			}
		}
		t.Run(filepath.Base(name), func(t *testing.T) { foldMapped(t, []byte(strings.Join(lines, "\n"))) })
	}
}
