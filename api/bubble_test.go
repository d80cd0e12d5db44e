package api_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/agents/demo"
	"github.com/tetherhq/tether/agents/runner"
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
// as in newEnvStore, without AcceptAgent the agents "demo" (in process)
// and "ext" (for a worker) are accepted.
func newBubbleServer(t *testing.T, st store.Store, opts api.Options, eopts engine.Options) http.Handler {
	t.Helper()
	if eopts.AcceptAgent == nil {
		eopts.AcceptAgent = func(n string) bool { return n == "demo" || n == "ext" }
	}
	e := engine.New(st, eopts)
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	rn := runner.New(e, map[string]agents.Agent{"demo": demo.New()}, runner.Options{})
	rn.Start()
	ds := streams.New(st, e.Hub(), streams.Options{})
	if err := ds.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	opts.Streams = ds
	srv := api.New(e, opts)
	t.Cleanup(func() {
		rn.Shutdown(context.Background())
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

// serveStream serves one request for a stream on h in the calling
// goroutine, and returns its answer once the stream has ended. A stream
// the server reset (http.ErrAbortHandler) reads as its frames, then
// errReset.
func serveStream(h http.Handler, method, path, body string, hdr ...string) *http.Response {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	reset := func() (reset bool) {
		defer func() {
			if v := recover(); v != nil {
				if v != http.ErrAbortHandler {
					panic(v)
				}
				reset = true
			}
		}()
		h.ServeHTTP(rec, req)
		return false
	}()
	res := rec.Result()
	if reset {
		res.Body = io.NopCloser(io.MultiReader(res.Body, iotest.ErrReader(errReset)))
	}
	return res
}

// errReset is the read error of a stream the server reset.
var errReset = errors.New("the stream was reset")
