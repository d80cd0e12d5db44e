package api_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// heldStart is a store whose first read of a page of a log, once armed,
// waits until released: a fold of a long run, slow to read, with the run
// going on meanwhile.
type heldStart struct {
	store.Store
	armed   atomic.Bool
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

// hold holds the first read of more than one record once armed.
func (h *heldStart) hold(ctx context.Context, limit int) error {
	if limit > 1 && h.armed.CompareAndSwap(true, false) {
		h.once.Do(func() { close(h.entered) })
		select {
		case <-h.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (h *heldStart) ReadEvents(ctx context.Context, threadID string, after tether.Offset, limit int) ([]*tether.Record, error) {
	if err := h.hold(ctx, limit); err != nil {
		return nil, err
	}
	return h.Store.ReadEvents(ctx, threadID, after, limit)
}

func (h *heldStart) ReadPage(ctx context.Context, threadID string, after tether.Offset, limit, maxBytes int) ([]*tether.Record, bool, error) {
	if err := h.hold(ctx, limit); err != nil {
		return nil, false, err
	}
	return h.Store.ReadPage(ctx, threadID, after, limit, maxBytes)
}

// resumeDuringLongRun makes a run of 40 text deltas ("a"), then resumes
// its stream at path(run, the offset of the 20th) while the fold's first
// read of the store is held, appends 40 more ("b"), one event a batch,
// more batches than a subscriber's buffer (16) holds, releases the read
// and finishes the run. It returns the resumed stream's body, read to its
// end: every delta after the cursor, then the run's end, if the resume
// holds.
func resumeDuringLongRun(t *testing.T, path func(run string, cursor tether.Offset) string) string {
	t.Helper()
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
		res, err := http.Get(v.url + path(run, cursor))
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		got <- answer{res.StatusCode, string(b), err}
	}()
	<-st.entered
	appendText(40, "b")
	close(st.release)
	v.mustDo(200, "POST", "/v1/runs/"+run+"/events", `[{"type":"run.finished","status":"done"}]`, lease...)
	a := <-got
	if a.err != nil || a.status != 200 {
		t.Fatalf("resume: status %d, err %v: %.300s", a.status, a.err, a.body)
	}
	return a.body
}

// TestAISDKResumeOfALongRun: a UI message stream resumed mid-run folds
// the run up to the cursor first; while it does, the run goes on by more
// events than a subscriber's buffer holds (here 16). The resume still
// sends every chunk after the cursor and ends with the run. The fold was
// read through subscriptions of the hub, which cut it (or the stream's
// own, buffering meanwhile) as too slow: the client resumed, folded
// again, and was cut again, without end, on a run long enough.
func TestAISDKResumeOfALongRun(t *testing.T) {
	body := resumeDuringLongRun(t, func(run string, cursor tether.Offset) string {
		return "/v1/ai-sdk/ext/chat/t1/stream?run_id=" + run + "&after=" + string(cursor)
	})
	var text strings.Builder
	finished := false
	for _, f := range parseUI(t, body) {
		if f.chunk["type"] == "text-delta" {
			text.WriteString(f.chunk["delta"].(string))
		}
		finished = finished || f.chunk["type"] == "finish"
	}
	if want := strings.Repeat("a", 20) + strings.Repeat("b", 40); text.String() != want || !finished {
		t.Fatalf("resumed text %q (finish: %v), want %q and the finish", text.String(), finished, want)
	}
}
