package api_test

import (
	"io"
	"testing"
	"time"

	"github.com/tetherhq/tether/api"
)

// TestAGUIJoinEndedRunFromNow: a join of a run that has ended, from the
// tail (?after=now), ends at once and cleanly, as a join from a cursor at
// its end does (protocol.md §5: a subscription whose run ended at or
// before the cursor ends right away). It stayed open with nothing to
// send until --max-stream-lifetime, and was then reset, which a client
// takes for a drop and joins again.
func TestAGUIJoinEndedRunFromNow(t *testing.T) {
	v := newEnv(t, api.Options{MaxStreamLifetime: time.Second, Heartbeat: 50 * time.Millisecond})
	frames, err := v.agui("POST", "/v1/ag-ui/demo", runInput("t1", "run-1", "q", `{"tokens":3,"delay_ms":0}`)).all()
	if err != io.EOF {
		t.Fatal(err)
	}
	last := frames[len(frames)-1].id
	for _, after := range []string{last, "now"} {
		got, err := v.agui("GET", "/v1/ag-ui/threads/t1/runs/current/events?after="+after, nil).all()
		if err != io.EOF || len(got) != 0 {
			t.Fatalf("after=%s: %d frames, then %v; want none and a clean end", after, len(got), err)
		}
	}
}
