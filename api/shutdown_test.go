package api_test

import (
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tetherhq/tether/api"
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
