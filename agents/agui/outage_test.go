package agui_test

import (
	"context"
	"net/http"
	"strings"
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
// has no quorum.
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
			f.once.Do(func() { close(f.failed) })
			return nil, store.ErrUnavailable
		}
	}
	return f.Store.Commit(ctx, b)
}

// An append the store could not take (unavailable) is the store's
// failure, not the upstream's: the run ended upstream_error, "The AG-UI
// agent sent an event Tether could not store", though the agent sent
// nothing wrong.
func TestStoreOutageIsNotTheUpstreams(t *testing.T) {
	st := &failing{Store: testutil.OpenStore(t, ""), typ: tether.EventTextDelta, failed: make(chan struct{})}
	st.fails.Store(1)
	u := newUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"type\":\"RUN_STARTED\"}\n\n" +
			"data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m1\",\"role\":\"assistant\"}\n\n" +
			"data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m1\",\"delta\":\"hello\"}\n\n"))
		w.(http.Flusher).Flush()
		// The rest once the store refused the text: the run is still
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
	r := w.wait(t, w.start(t, "", "hi")).Runs[0]
	if r.Status != tether.RunError || r.Error == nil || r.Error.Code != agui.CodeStoreError {
		t.Fatalf("run %s %+v, want error %s", r.Status, r.Error, agui.CodeStoreError)
	}
	if strings.Contains(r.Error.Message, "agent") {
		t.Fatalf("the message blames the agent: %q", r.Error.Message)
	}
}
