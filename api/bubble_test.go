package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/streams"
)

// newBubbleServer is a server on st (a real store, or one that injects
// faults) for a test in a synctest bubble: its waits run on the bubble's
// clock, so a test moves time on exactly and reads from the clock when a
// wait ended, instead of sleeping and timing on a loaded machine. It is
// served without a listener (serveOnce): a goroutine in a network call
// would keep the bubble's clock from moving. Durable Streams are mounted;
// without AcceptAgent, the agent "ext" (for a worker) is accepted.
func newBubbleServer(t *testing.T, st store.Store, opts api.Options, eopts engine.Options) http.Handler {
	t.Helper()
	if eopts.AcceptAgent == nil {
		eopts.AcceptAgent = func(n string) bool { return n == "ext" }
	}
	e := engine.New(st, eopts)
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ds := streams.New(st, e.Hub(), streams.Options{})
	if err := ds.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	opts.Streams = ds
	srv := api.New(e, opts)
	t.Cleanup(func() {
		srv.Shutdown()
		ds.Close()
		e.Close()
	})
	return srv.Handler()
}

// serveOnce serves one request on h in the calling goroutine.
func serveOnce(h http.Handler, method, path, body string, hdr ...string) *resp {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return &resp{rec.Code, rec.Header(), rec.Body.Bytes()}
}
