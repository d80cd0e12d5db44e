package api_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/streams"
	"github.com/tetherhq/tether/streams/wake"
)

const (
	adminToken  = "admin-token-0123456789"
	clientToken = "client-token-0123456789"
)

// newStreamsEnv is an API server with Durable Streams mounted, over the
// engine's hub, with auth on.
func newStreamsEnv(t *testing.T) *env {
	t.Helper()
	st := testutil.OpenStore(t, "")
	e := engine.New(st, engine.Options{})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var wk *wake.Manager
	ds := streams.New(st, e.Hub(), streams.Options{OnAppend: func(p string) { wk.Notify(p) },
		OnDelete: func(p string) { wk.Deleted(p) }})
	wk = wake.New(ds, st, wake.Options{})
	if err := ds.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := wk.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := api.New(e, api.Options{Streams: ds, Wake: wk, LongPollTimeout: 200 * time.Millisecond,
		Keys: []api.Key{{Token: adminToken, Role: api.RoleAdmin}, {Token: clientToken, Role: api.RoleClient}}})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Shutdown()
		hs.Close()
		wk.Close()
		ds.Close()
		e.Close()
	})
	return &env{t: t, url: hs.URL, e: e, st: st, srv: srv, hs: hs}
}

func TestDurableStreamsMount(t *testing.T) {
	v := newStreamsEnv(t)
	auth := []string{"Authorization", "Bearer " + clientToken}
	v.mustDo(401, "PUT", "/v1/stream/s/1", "")
	r := v.mustDo(201, "PUT", "/v1/stream/s/1", `{"a":1}`, append(auth, "Content-Type", "application/json")...)
	tail := r.header.Get("Stream-Next-Offset")
	if _, _, err := tether.ParseOffset(tether.Offset(tail)); err != nil {
		t.Fatalf("a stream offset is not a Tether offset: %q", tail)
	}
	r = v.mustDo(200, "GET", "/v1/stream/s/1", nil, auth...)
	if string(r.body) != `[{"a":1}]` {
		t.Fatalf("read: %s", r.body)
	}
	// Long polls end with the server's long-poll timeout.
	v.mustDo(204, "GET", "/v1/stream/s/1?live=long-poll&offset="+tail, nil, auth...)

	// The JWKS is public, and wake actions authenticate with the wake's
	// token rather than an API key.
	r = v.mustDo(200, "GET", "/v1/stream/__ds/jwks.json", nil)
	var jwks wake.JWKS
	if err := json.Unmarshal(r.body, &jwks); err != nil || len(jwks.Keys) != 1 {
		t.Fatalf("jwks: %s", r.body)
	}
	// The scheme's name is case-insensitive (RFC 9110 §11.1).
	for _, scheme := range []string{"Bearer ", "bearer ", "BEARER "} {
		r = v.mustDo(404, "POST", "/v1/stream/__ds/subscriptions/x/callback", `{}`, "Authorization", scheme+"not-a-wake-token")
		if r.code() != wake.CodeSubscriptionNotFound {
			t.Fatalf("callback with %q: %s", scheme, r.body)
		}
	}

	// Streams are not threads.
	v.mustDo(201, "POST", "/v1/threads", map[string]any{"id": "t1"}, auth...)
	var page struct {
		Threads []tether.Thread `json:"threads"`
	}
	v.mustDo(200, "GET", "/v1/threads", nil, auth...).json(&page)
	if len(page.Threads) != 1 || page.Threads[0].ID != "t1" {
		t.Fatalf("listing: %+v", page.Threads)
	}
	v.mustDo(404, "GET", "/v1/threads/ds:s%2F1", nil, auth...)
	// A thread's log is a read-only JSON stream.
	r = v.mustDo(200, "GET", "/v1/stream/threads/t1?offset=-1", nil, auth...)
	if string(r.body) != "[]" || r.header.Get("Stream-Next-Offset") != streams.ZeroOffset {
		t.Fatalf("an empty thread log: %s %v", r.body, r.header)
	}
	v.mustDo(405, "DELETE", "/v1/stream/threads/t1", nil, auth...)
	// Nor can it be forked: a fork would be a second copy of the thread's
	// events, written to on its own.
	if r = v.mustDo(400, "PUT", "/v1/stream/f", nil, append(auth, "Stream-Forked-From", "/v1/stream/threads/t1")...); r.code() != "bad_request" {
		t.Fatalf("fork of a thread log: %s", r.body)
	}
	v.mustDo(404, "GET", "/v1/stream/f", nil, auth...)
}
