package wake_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/streams/wake"
)

// A webhook endpoint that holds its requests gets one at a time: a wake's
// lease starts once its delivery is taken (2xx), so a lease shorter than
// the delivery does not start a new wake, and another request to the same
// endpoint, every lease_ttl_ms while the first is held. The test watches
// three leases' time; a second request at once is the defect whenever it
// comes.
func TestSlowWebhookGetsOneRequestAtATime(t *testing.T) {
	var mu sync.Mutex
	inflight, most := 0, 0
	arrived := make(chan struct{}, 100)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inflight++
		most = max(most, inflight)
		mu.Unlock()
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		mu.Lock()
		inflight--
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	defer close(release)
	e := newEnvWith(t, wake.Options{BaseURL: "http://tether.test", AllowLoopback: true, DeliveryTimeout: time.Minute})
	if _, _, err := e.m.Create("s", wake.CreateRequest{Type: wake.TypeWebhook, Streams: []string{"x"}, WebhookURL: srv.URL, LeaseTTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	e.write("x", `[1]`)
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook request")
	}
	for end := time.Now().Add(3500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		n := most
		mu.Unlock()
		if n > 1 {
			t.Fatalf("%d requests at once to one subscription's webhook", n)
		}
	}
}

// A failed delivery is logged with its status code, never with what the
// receiver wrote: its reason phrase is its own text.
func TestWebhookFailureLogsNoReceiverText(t *testing.T) {
	const secret = "SECRET-RECEIVER-DETAIL-3b1d"
	got := make(chan struct{}, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		buf.WriteString("HTTP/1.1 500 " + secret + "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		buf.Flush()
		conn.Close()
		got <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	log := &testutil.SyncBuffer{}
	e := newEnvWith(t, wake.Options{BaseURL: "http://tether.test", AllowLoopback: true, Logger: slog.New(slog.NewTextHandler(log, nil))})
	if _, _, err := e.m.Create("s", wake.CreateRequest{Type: wake.TypeWebhook, Streams: []string{"x"}, WebhookURL: srv.URL, LeaseTTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	e.write("x", `[1]`)
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook request")
	}
	var out string
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if out = log.String(); strings.Contains(out, "webhook delivery failed") {
			break
		}
	}
	if !strings.Contains(out, "webhook delivery failed") || !strings.Contains(out, "500") || strings.Contains(out, secret) {
		t.Fatalf("log: %s", out)
	}
}
