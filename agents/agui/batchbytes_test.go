package agui_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents/agui"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/natsstore"
	"github.com/tetherhq/tether/store/natsstore/natstest"
)

// held is a store that holds its first commit of a custom event until
// released: what the upstream sends meanwhile waits for the next append.
type held struct {
	store.Store
	max     int // events per commit at most, if set (else too large)
	once    sync.Once
	holding chan struct{} // closed when the commit is held
	release chan struct{}
}

func (h *held) Commit(ctx context.Context, b *store.Batch) (*store.Result, error) {
	if h.max > 0 && len(b.Events) > h.max {
		return nil, fmt.Errorf("%w: %d events", store.ErrTooLarge, len(b.Events))
	}
	for _, ev := range b.Events {
		if ev.Type == tether.EventCustom {
			h.once.Do(func() {
				close(h.holding)
				<-h.release
			})
			break
		}
	}
	return h.Store.Commit(ctx, b)
}

// pipeUpstream is an upstream whose response body is a pipe the test
// writes: a write returns once the agent has read it, so the test knows
// what the agent has read (over TCP, the kernel's buffers hide it).
type pipeUpstream struct{ w chan *io.PipeWriter }

func (p *pipeUpstream) RoundTrip(req *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, req.Body)
	r, w := io.Pipe()
	p.w <- w
	go func() { <-req.Context().Done(); _ = w.CloseWithError(req.Context().Err()) }()
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: r, Request: req}, nil
}

// A burst of large upstream events that arrives while an append is being
// committed is appended in batches the store takes: on JetStream a batch
// is one message, at most the server's max_payload (1 MiB by default),
// and events that each fit were gathered into one append that did not
// (the run then ended upstream_error, too_large).
func TestLargeBurstInSeveralBatchesNATS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns, err := natsstore.Open(ctx, natsstore.Options{URL: natstest.StartServer(t).ClientURL(), Node: "n1", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	burst(t, &held{Store: ns}, 8, 300<<10) // 2.4 MiB in all
}

// A store that takes fewer events in one commit than an append gathered
// refuses it whole (too large), and gets it in smaller appends.
func TestBurstInWhatTheStoreTakes(t *testing.T) {
	burst(t, &held{Store: testutil.OpenStore(t, ""), max: 3}, 10, 10)
}

// burst has an upstream send n custom events of size bytes each while the
// store holds the append before them, and checks that the run stores them
// all, in order.
func burst(t *testing.T, st *held, n, size int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st.holding, st.release = make(chan struct{}), make(chan struct{})
	up := &pipeUpstream{w: make(chan *io.PipeWriter, 1)}
	w := newWorldOn(t, st, agui.Options{URL: "http://upstream.invalid/agent", HTTPClient: &http.Client{Transport: up}})
	id := w.start(t, "", "burst")
	var pw *io.PipeWriter
	select {
	case pw = <-up.w:
	case <-ctx.Done():
		t.Fatal("no request upstream")
	}
	send := func(frame string) {
		t.Helper()
		if _, err := io.WriteString(pw, frame); err != nil {
			t.Fatal(err)
		}
	}
	big := strings.Repeat("x", size)
	send(`data: {"type":"RUN_STARTED"}` + "\n\n")
	send(`data: {"type":"CUSTOM","name":"first","value":1}` + "\n\n")
	<-st.holding
	for i := range n {
		send(fmt.Sprintf(`data: {"type":"CUSTOM","name":"big%d","value":%q}`, i, big) + "\n\n")
	}
	// Read once the burst is: the agent has it all, waiting.
	send(`data: {"type":"CUSTOM","name":"last","value":1}` + "\n\n")
	close(st.release)
	send(`data: {"type":"RUN_FINISHED"}` + "\n\n")

	r := w.wait(t, id).Runs[0]
	if r.Status != tether.RunDone {
		t.Fatalf("run %s %+v", r.Status, r.Error)
	}
	var names []string
	for _, ev := range w.log(t, id) {
		if ev.Type == tether.EventCustom {
			names = append(names, ev.Name)
		}
	}
	want := []string{"first"}
	for i := range n {
		want = append(want, fmt.Sprintf("big%d", i))
	}
	if want = append(want, "last"); strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("custom events %v", names)
	}
}
