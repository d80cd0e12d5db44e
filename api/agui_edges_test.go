package api_test

import (
	"bufio"
	"encoding/json"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tetherhq/tether/agui/aguitest"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// TestAGUIJoinEndedRunFromNow: a join of a run that has ended, from the
// tail (?after=now), ends at once and cleanly, as a join from a cursor at
// its end does (protocol.md §5: a subscription whose run ended at or
// before the cursor ends right away). It stayed open with nothing to
// send until --max-stream-lifetime, and was then reset, which a client
// takes for a drop and joins again. On a synctest bubble's clock, so that
// the run's own stream never meets the lifetime however slow the machine.
func TestAGUIJoinEndedRunFromNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newBubbleServer(t, testutil.OpenStore(t, ""), api.Options{MaxStreamLifetime: time.Minute}, engine.Options{})
		read := func(method, path, body string) ([]aguiFrame, error) {
			res := serveStream(h, method, path, body, "Accept", "text/event-stream", "Content-Type", "application/json")
			if res.StatusCode != 200 {
				b, _ := io.ReadAll(res.Body)
				t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
			}
			return (&aguiReader{t: t, res: res, rd: bufio.NewReader(res.Body), v: aguitest.NewVerifier()}).all()
		}
		in, _ := json.Marshal(runInput("t1", "run-1", "q", `{"tokens":3,"delay_ms":0}`))
		frames, err := read("POST", "/v1/ag-ui/demo", string(in))
		if err != io.EOF {
			t.Fatal(err)
		}
		last := frames[len(frames)-1].id
		for _, after := range []string{last, "now"} {
			got, err := read("GET", "/v1/ag-ui/threads/t1/runs/current/events?after="+after, "")
			if err != io.EOF || len(got) != 0 {
				t.Fatalf("after=%s: %d frames, then %v; want none and a clean end", after, len(got), err)
			}
		}
	})
}
