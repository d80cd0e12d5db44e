package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/streams"
)

// fuzzEnv is a real server for fuzz targets: a SQLite store under a
// temporary directory, the engine and the API over HTTP, with Durable
// Streams mounted. It lives for the whole fuzz run, not one input, so
// that each input costs a few requests and not a server.
type fuzzEnv struct {
	tb  testing.TB
	url string
	e   *engine.Engine
	n   int
}

func newFuzzEnv(tb testing.TB) *fuzzEnv {
	tb.Helper()
	st := testutil.OpenStore(tb, "")
	e := engine.New(st, engine.Options{AcceptAgent: func(n string) bool { return n == "ext" }, LeaseTTL: time.Minute})
	if err := e.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	ds := streams.New(st, e.Hub(), streams.Options{})
	if err := ds.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	srv := api.New(e, api.Options{Streams: ds, MaxWait: 20 * time.Millisecond, LongPollTimeout: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	hs := httptest.NewServer(srv.Handler())
	tb.Cleanup(func() {
		srv.Shutdown()
		hs.Close()
		ds.Close()
		e.Close()
	})
	return &fuzzEnv{tb: tb, url: hs.URL, e: e}
}

// do sends a request; hdr holds name, value pairs, and a value "" is not
// sent. A JSON body is sent as application/json.
func (v *fuzzEnv) do(t testing.TB, method, path string, body []byte, hdr ...string) *resp {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, v.url+path, rd)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] != "" {
			req.Header[http.CanonicalHeaderKey(hdr[i])] = []string{hdr[i+1]}
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return &resp{res.StatusCode, res.Header, b}
}

// sendable skips an input whose header values HTTP cannot carry (control
// characters): the client refuses them, so no server ever sees them.
func sendable(t *testing.T, values ...string) {
	for _, s := range values {
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
				t.Skip("not a valid header value")
			}
		}
		if strings.TrimSpace(s) != s {
			t.Skip("header values are trimmed in transit")
		}
	}
}

// claimed makes a new thread with one run of agent "ext", claims it, and
// returns the thread, the run and the lease token.
func (v *fuzzEnv) claimed(t testing.TB) (tid, rid, lease string) {
	t.Helper()
	v.n++
	tid = fmt.Sprintf("fz%d", v.n)
	if r := v.do(t, "POST", "/v1/threads", []byte(`{"id":"`+tid+`"}`)); r.status != 201 {
		t.Fatalf("create thread: %d %s", r.status, r.body)
	}
	if r := v.do(t, "POST", "/v1/threads/"+tid+"/runs", []byte(`{"agent":"ext","input":{"messages":[{"role":"user","content":"hi","id":"u1"}]}}`)); r.status != 201 {
		t.Fatalf("create run: %d %s", r.status, r.body)
	}
	r := v.do(t, "POST", "/v1/workers/claim", []byte(`{"worker_id":"w","agents":["ext"]}`))
	var c struct {
		Run   tether.Run
		Lease struct{ Token string }
	}
	if r.status != 200 {
		t.Fatalf("claim: %d %s", r.status, r.body)
	}
	r.json(&c)
	if c.Run.ThreadID != tid {
		t.Fatalf("claimed a run of %s, want %s", c.Run.ThreadID, tid)
	}
	return tid, c.Run.ID, c.Lease.Token
}

// log reads a thread's whole log as raw events.
func (v *fuzzEnv) log(t testing.TB, tid string) []json.RawMessage {
	t.Helper()
	var all []json.RawMessage
	after := "-1"
	for {
		r := v.do(t, "GET", "/v1/threads/"+tid+"/events?after="+after, nil, "Accept", "application/json")
		if r.status != 200 {
			t.Fatalf("read log of %s: %d %s", tid, r.status, r.body)
		}
		var page struct {
			Events   []json.RawMessage
			Next     tether.Offset `json:"next_offset"`
			UpToDate bool          `json:"up_to_date"`
		}
		r.json(&page)
		all = append(all, page.Events...)
		if page.UpToDate {
			return all
		}
		after = string(page.Next)
	}
}

// codeFor is the HTTP status of each error code (docs/protocol.md §1).
var codeFor = map[string]int{
	"bad_request": 400, "unauthorized": 401, "forbidden": 403, "not_found": 404, "conflict": 409,
	"run_active": 409, "lease_lost": 410, "gone": 410, "too_large": 413, "rate_limited": 429,
	"unavailable": 503, "internal": 500,
}

// checkError checks that a non-2xx answer has the error body of §1 with a
// code that matches its status, and that no answer is a server fault.
func checkError(t testing.TB, what string, r *resp) {
	t.Helper()
	if r.status >= 500 {
		t.Fatalf("%s: %d %s", what, r.status, r.body)
	}
	if r.status < 300 {
		return
	}
	var b struct {
		Error *struct{ Code, Message string }
	}
	if err := json.Unmarshal(r.body, &b); err != nil || b.Error == nil {
		t.Fatalf("%s: %d with body %q", what, r.status, r.body)
	}
	if codeFor[b.Error.Code] != r.status {
		t.Fatalf("%s: %d with code %q", what, r.status, b.Error.Code)
	}
	if b.Error.Message == "" || strings.Contains(b.Error.Message, "goroutine ") || strings.Contains(b.Error.Message, "sql") {
		t.Fatalf("%s: message %q", what, b.Error.Message)
	}
}
