package agui_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents/agui"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// failing is a store whose next commits (fails of them) that hold an
// event of type typ fail unavailable, as a JetStream store's do while it
// has no quorum; the first of them after committing (lost: its
// acknowledgement never came).
type failing struct {
	store.Store
	typ    string
	fails  atomic.Int32
	once   sync.Once
	failed chan struct{} // closed at the first failure
}

func (f *failing) Commit(ctx context.Context, b *store.Batch) (*store.Result, error) {
	for _, ev := range b.Events {
		if ev.Type == f.typ && f.fails.Add(-1) >= 0 {
			first := false
			f.once.Do(func() { first = true; close(f.failed) })
			if first {
				if _, err := f.Store.Commit(ctx, b); err != nil {
					return nil, err
				}
			}
			return nil, store.ErrUnavailable
		}
	}
	return f.Store.Commit(ctx, b)
}

// An append the store could not take for a moment (unavailable, the
// first time after all committing it) is sent again until it lands,
// once: the run goes on and ends as the upstream ended it, with its text
// once. The run ended error (store_error) at the first failure, though
// the store was back a moment later.
func TestStoreOutageRiddenOut(t *testing.T) {
	st := &failing{Store: testutil.OpenStore(t, ""), typ: tether.EventTextDelta, failed: make(chan struct{})}
	st.fails.Store(3)
	u := newUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"type\":\"RUN_STARTED\"}\n\n" +
			"data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m1\",\"role\":\"assistant\"}\n\n" +
			"data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m1\",\"delta\":\"hello\"}\n\n"))
		w.(http.Flusher).Flush()
		// The rest once the store failed the text: the run is still
		// going when its append fails.
		select {
		case <-st.failed:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte("data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m1\",\"delta\":\" there\"}\n\n" +
			"data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m1\"}\n\n" +
			"data: {\"type\":\"RUN_FINISHED\"}\n\n"))
	})
	w := newWorldOn(t, st, agui.Options{URL: u.URL})
	snap := w.wait(t, w.start(t, "", "hi"))
	if r := snap.Runs[0]; r.Status != tether.RunDone {
		t.Fatalf("run %s %+v, want done", r.Status, r.Error)
	}
	m := snap.Messages[len(snap.Messages)-1]
	if len(m.Parts) != 1 || m.Parts[0].Text != "hello there" {
		t.Fatalf("answer %+v, want the text \"hello there\"", m.Parts)
	}
}
