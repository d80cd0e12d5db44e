package runs

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
)

// workerVector is a golden vector of the worker rules: a thread's
// committed events, then what a worker holding run_id sends; worker[i] is
// refused with code at error_index (every event before it is accepted), or,
// without code, all are accepted. Worker events carry no offset or ts, as
// on the wire.
type workerVector struct {
	Name       string            `json:"name"`
	Thread     json.RawMessage   `json:"thread"`
	Events     []json.RawMessage `json:"events"`
	RunID      string            `json:"run_id"`
	Worker     []json.RawMessage `json:"worker"`
	ErrorIndex int               `json:"error_index"`
	Code       tether.Code       `json:"code"`
}

func TestWorkerVectors(t *testing.T) {
	files, err := filepath.Glob("testdata/worker/*.json")
	if err != nil || len(files) < 6 {
		t.Fatalf("want at least 6 vectors, found %d (%v)", len(files), err)
	}
	for _, name := range files {
		t.Run(strings.TrimSuffix(filepath.Base(name), ".json"), func(t *testing.T) {
			var v workerVector
			readVector(t, name, &v)
			s := NewState(vectorThread(t, v.Thread))
			var last tether.Time
			for i, raw := range v.Events {
				var e tether.Event
				decodeStrict(t, raw, &e)
				if err := s.Apply(&e); err != nil {
					t.Fatalf("event %d (%s): %v", i, e.Type, err)
				}
				last = e.TS
			}
			// The engine's way: stateless checks, then the rules, then
			// the machine, on a speculative Tx.
			tx := s.Machine().Clone().Begin()
			for i, raw := range v.Worker {
				var e tether.Event
				decodeStrict(t, raw, &e)
				err := WorkerEvent(&e, v.RunID)
				e.RunID = v.RunID
				e.TS = tether.At(last.Add(time.Duration(i+1) * time.Second))
				if err == nil {
					err = WorkerRules(tx, &e)
				}
				if err == nil {
					err = tx.Apply(&e)
				}
				switch {
				case v.Code != "" && i == v.ErrorIndex:
					if tether.CodeOf(err) != v.Code {
						t.Fatalf("worker event %d (%s): %v, want code %s", i, e.Type, err, v.Code)
					}
					t.Logf("%s: %v", e.Type, err)
					return
				case err != nil:
					t.Fatalf("worker event %d (%s): %v", i, e.Type, err)
				}
			}
			if v.Code != "" {
				t.Fatalf("error_index %d is past the %d worker events", v.ErrorIndex, len(v.Worker))
			}
		})
	}
}

// The rules bind workers, not the log: a log that holds what they refuse
// (written before they existed) still folds.
func TestWorkerRulesNotInTheFold(t *testing.T) {
	var v workerVector
	readVector(t, "testdata/worker/01_done_after_cancel_requested.json", &v)
	s := NewState(vectorThread(t, v.Thread))
	for _, raw := range v.Events {
		var e tether.Event
		decodeStrict(t, raw, &e)
		if err := s.Apply(&e); err != nil {
			t.Fatal(err)
		}
	}
	for i, typ := range []string{`{"type":"message.updated","message_id":"m0","metadata":{"a":1}}`, `{"type":"run.finished","status":"done"}`} {
		var e tether.Event
		decodeStrict(t, json.RawMessage(typ), &e)
		e.RunID, e.TS = v.RunID, tether.At(time.Date(2025, 1, 1, 0, 1, i, 0, time.UTC))
		e.Offset = tether.Offset(fmt.Sprintf("0000000001_%016d", 100+i))
		if err := s.Apply(&e); err != nil {
			t.Fatalf("%s: %v", e.Type, err)
		}
	}
	if r, _ := s.Machine().Run(v.RunID); r.Status != tether.RunDone {
		t.Fatalf("run %s, want done (as the log says)", r.Status)
	}
}
