package api_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// Streams that arrive while the server shuts down either start (and end
// with the shutdown) or are refused with 503 unavailable; none slips in
// after Shutdown began waiting for the streams it has. Run under -race,
// this also checks that registering a stream never races with that wait.
func TestStreamsOpenedDuringShutdown(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.thread("t1")
	paths := []string{"/v1/threads/t1/events", "/v1/threads/t1/events?wait=5000&after=now", "/v1/ws"}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		refused int
	)
	stop := make(chan struct{})
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := paths[i%len(paths)]
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("GET", v.url+path, nil)
				if i%len(paths) == 1 {
					req.Header.Set("Accept", "application/json")
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					continue // the listener may be gone
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				switch {
				case res.StatusCode == http.StatusServiceUnavailable:
					r := &resp{res.StatusCode, res.Header, body}
					if r.code() != "unavailable" {
						t.Errorf("%s: 503 with code %q: %s", path, r.code(), body)
					}
					mu.Lock()
					refused++
					mu.Unlock()
				case res.StatusCode >= 300 && res.StatusCode != http.StatusBadRequest && res.StatusCode != http.StatusUpgradeRequired:
					t.Errorf("%s: status %d: %s", path, res.StatusCode, body)
				}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	v.srv.Shutdown()
	// Keep knocking for a moment after Shutdown returned.
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	if refused == 0 {
		t.Error("no request was refused after shutdown")
	}
}

// heldReadStore holds the hold-th read of a thread's log (counted from
// when armed) until released, and counts the reads.
type heldReadStore struct {
	store.Store
	armed   atomic.Bool
	reads   atomic.Int64
	hold    int64
	held    chan struct{}
	release chan struct{}
}

func (s *heldReadStore) ReadEvents(ctx context.Context, threadID string, after tether.Offset, limit int) ([]*tether.Record, error) {
	if s.armed.Load() {
		if s.reads.Add(1) == s.hold {
			s.held <- struct{}{}
			<-s.release
		}
	}
	return s.Store.ReadEvents(ctx, threadID, after, limit)
}

func (s *heldReadStore) ReadPage(ctx context.Context, threadID string, after tether.Offset, limit, maxBytes int) ([]*tether.Record, bool, error) {
	if s.armed.Load() {
		if s.reads.Add(1) == s.hold {
			s.held <- struct{}{}
			<-s.release
		}
	}
	return s.Store.ReadPage(ctx, threadID, after, limit, maxBytes)
}

// An SSE stream catching up from the store at shutdown ends there (with
// reconnect shutdown) rather than after the rest of the log: its catch-up
// looked for the shutdown only once caught up, so a stream far behind, or
// read slowly, held the server's shutdown for as long as it took.
func TestShutdownEndsStreamInCatchUp(t *testing.T) {
	st := &heldReadStore{Store: testutil.OpenStore(t, ""), hold: 3, held: make(chan struct{}, 1), release: make(chan struct{})}
	v := newEnvStore(t, st, api.Options{}, catchUpEngine())
	v.longThread("t1", 200)

	st.armed.Store(true)
	s := v.sse("GET", "/v1/threads/t1/events?after=-1", nil)
	<-st.held // two pages read, the third held
	shut := make(chan struct{})
	go func() { v.srv.Shutdown(); close(shut) }()
	testutil.Eventually(t, 5*time.Second, "shutdown started", func() bool {
		return v.do("GET", "/readyz", nil).status == 503
	})
	close(st.release)
	fs := s.all()
	<-shut
	if last := fs[len(fs)-1]; last.event != "reconnect" || last.data != `{"reason":"shutdown"}` {
		t.Fatalf("last frame %+v, want reconnect shutdown", last)
	}
	if n := st.reads.Load(); n > st.hold {
		t.Fatalf("%d reads of the log, %d after shutdown began: the catch-up went on", n, n-st.hold)
	}
	if n := len(eventFrames(fs)); n >= 200 {
		t.Fatalf("%d events sent after shutdown began", n)
	}
}
