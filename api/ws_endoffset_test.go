package api_test

import (
	"encoding/json"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
)

// The offset of an end frame is the last event delivered or, past it, the
// last one the filters skipped (protocol.md §5), also when what came after
// the last delivered event was only skipped: the run's run.finished, a
// batch of its own, filtered out by types. The end carried the offset of
// the last event delivered, and a client that went on from it (following
// the thread after the run) got events again that the subscription had
// already looked at.
func TestWSEndOffsetPastSkippedEvents(t *testing.T) {
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	v.thread("t1")
	run, lease := v.extRun("t1")
	w := v.ws("")
	w.subscribe("r", "run_id", run, "after", "now", "types", []string{tether.EventTextDelta})
	w.expect("subscribed", "r")
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"text.delta","message_id":"a1","delta":"hi"}]`, lease...)
	delta := w.expect("event", "r").ev()
	var fin []tether.Event
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"message.finished","message_id":"a1","status":"done"},{"type":"run.finished","status":"done"}]`, lease...)
	for _, raw := range v.readLog("t1") {
		var e tether.Event
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		if e.Offset.After(delta.Offset) {
			fin = append(fin, e)
		}
	}
	if len(fin) != 2 || fin[1].Type != tether.EventRunFinished {
		t.Fatalf("the log after the delta: %+v", fin)
	}
	if m := w.expect("end", "r"); m.Reason != "run_finished" || m.Offset != fin[1].Offset {
		t.Fatalf("end %s, want run_finished at %s (the delta was %s)", m.raw, fin[1].Offset, delta.Offset)
	}
}
