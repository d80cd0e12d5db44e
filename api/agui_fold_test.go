package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
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
	st := &heldStart{Store: testutil.OpenStore(t, ""), entered: make(chan struct{}), release: make(chan struct{})}
	var eopts engine.Options
	eopts.Hub.BufferEvents = 16
	v := newEnvStore(t, st, api.Options{}, eopts)
	v.thread("t1")
	run, lease := v.extRun("t1")
	appendText := func(n int, text string) {
		for range n {
			v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"text.delta","message_id":"a1","delta":"`+text+`"}]`, lease...)
		}
	}
	appendText(40, "a")
	var deltas []tether.Offset
	for after, done := "-1", false; !done; {
		var p struct {
			Events     []tether.Event
			NextOffset string `json:"next_offset"`
			UpToDate   bool   `json:"up_to_date"`
		}
		v.mustDo(200, "GET", "/v1/runs/"+run+"/events?types=text.delta&after="+after, nil, "Accept", "application/json").json(&p)
		for _, e := range p.Events {
			deltas = append(deltas, e.Offset)
		}
		after, done = p.NextOffset, p.UpToDate
	}
	cursor := deltas[19] // after 20 of the 40

	st.armed.Store(true)
	type answer struct {
		status int
		body   string
		err    error
	}
	got := make(chan answer, 1)
	go func() {
		res, err := http.Get(v.url + "/v1/ag-ui/threads/t1/runs/" + run + "/events?after=" + string(cursor))
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		got <- answer{res.StatusCode, string(b), err}
	}()
	<-st.entered
	appendText(40, "b") // one event a batch: more batches than the buffer holds
	close(st.release)
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"run.finished","status":"done"}]`, lease...)
	a := <-got
	if a.err != nil || a.status != 200 {
		t.Fatalf("join: status %d, err %v: %.300s", a.status, a.err, a.body)
	}
	var text strings.Builder
	finished := false
	for _, line := range strings.Split(a.body, "\n") {
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
