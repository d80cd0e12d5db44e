package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
)

// TestAGUIResumeOfALongRun: an AG-UI join from a cursor rebuilds the
// projection from the log's start; while it reads, the run goes on by
// more events than a subscriber's buffer holds (here 16). The join still
// sends every frame after the cursor and ends with the run. The rebuild
// read the log through the stream's own subscription, which took in what
// was appended meanwhile and was cut as too slow before it reached the
// cursor: the client joined again from the same cursor and was cut
// again, without end, on a log long enough.
func TestAGUIResumeOfALongRun(t *testing.T) {
	body := resumeDuringLongRun(t, func(run string, cursor tether.Offset) string {
		return "/v1/ag-ui/threads/t1/runs/" + run + "/events?after=" + string(cursor)
	})
	var text strings.Builder
	finished := false
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct{ Type, Delta string }
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("frame %q: %v", data, err)
		}
		switch ev.Type {
		case "TEXT_MESSAGE_CONTENT":
			text.WriteString(ev.Delta)
		case "RUN_FINISHED":
			finished = true
		}
	}
	if want := strings.Repeat("a", 20) + strings.Repeat("b", 40); text.String() != want || !finished {
		t.Fatalf("joined text %q (RUN_FINISHED: %v), want %q and RUN_FINISHED", text.String(), finished, want)
	}
}
