package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// heldReads holds ReadEvents and ReadPage while held is set, until the
// read's context ends or the test releases it.
type heldReads struct {
	store.Store
	held     atomic.Bool
	inflight atomic.Int64
	release  chan struct{}
}

func (s *heldReads) ReadEvents(ctx context.Context, thread string, after tether.Offset, limit int) ([]*tether.Record, error) {
	if s.held.Load() {
		s.inflight.Add(1)
		defer s.inflight.Add(-1)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.release:
		}
	}
	return s.Store.ReadEvents(ctx, thread, after, limit)
}

func (s *heldReads) ReadPage(ctx context.Context, thread string, after tether.Offset, limit, maxBytes int) ([]*tether.Record, bool, error) {
	if s.held.Load() {
		s.inflight.Add(1)
		defer s.inflight.Add(-1)
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-s.release:
		}
	}
	return s.Store.ReadPage(ctx, thread, after, limit, maxBytes)
}

// A stream whose client leaves while the stream is still reading history
// must stop reading: the soak (bench/soak) found 16,000 SSE streams of
// clients long gone queued on the store's 4 reader connections, each
// still to read its whole catch-up, so that every read of the server
// (long polls, sweeps, thread loads) waited minutes behind them. A stream
// on a taken-over connection runs with no context that ends when its
// client leaves, so it notices only at its next write.
func TestSSEStreamStopsReadingWhenClientLeaves(t *testing.T) {
	dir := t.TempDir()
	// History written by an earlier server, so that the new one's fan-out
	// has none of it in memory and must read it from the store.
	st := testutil.OpenStore(t, dir)
	e := engine.New(st, engine.Options{AcceptAgent: func(string) bool { return true }})
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.CreateThread(t.Context(), "t1", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateRun(t.Context(), "t1", engine.RunRequest{Agent: "ext", Input: tether.RunInput{Messages: []tether.InputMessage{{Role: tether.RoleUser, Content: "hi"}}}}); err != nil {
		t.Fatal(err)
	}
	e.Close()
	st.Close()

	hs := &heldReads{Store: testutil.OpenStore(t, dir), release: make(chan struct{})}
	e = engine.New(hs, engine.Options{})
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv := api.New(e, api.Options{})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		close(hs.release)
		srv.Shutdown()
		ts.Close()
		e.Close()
	})
	if _, err := e.Thread(t.Context(), "t1"); err != nil { // loaded before reads are held
		t.Fatal(err)
	}

	hs.held.Store(true)
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/v1/threads/t1/events?after=-1", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the stream to read history", func() bool { return hs.inflight.Load() == 1 })
	cancel() // the client leaves
	res.Body.Close()
	testutil.Eventually(t, 10*time.Second, "the stream to stop reading for a client that left", func() bool { return hs.inflight.Load() == 0 })
}
