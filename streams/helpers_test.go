package streams_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tetherhq/tether/hub"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/sqlitestore"
	"github.com/tetherhq/tether/streams"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a settable time for TTL tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is a service over a real SQLite store in a directory, with a hub fed
// by the store's commits (as the engine feeds its hub).
type env struct {
	t     *testing.T
	dir   string
	st    *sqlitestore.Store
	hub   *hub.Hub
	svc   *streams.Service
	clock *clock
	opts  streams.Options
	hopts hub.Options // the hub's, for tests of a follower that falls behind
}

func newEnv(t *testing.T, opts streams.Options) *env {
	return newEnvHub(t, opts, hub.Options{})
}

func newEnvHub(t *testing.T, opts streams.Options, hopts hub.Options) *env {
	e := &env{t: t, dir: t.TempDir(), clock: newClock(), opts: opts, hopts: hopts}
	if e.opts.Now == nil {
		e.opts.Now = e.clock.Now
	}
	e.open()
	return e
}

// open opens the store and starts a service on it.
func (e *env) open() {
	st, err := sqlitestore.Open(filepath.Join(e.dir, "tether.db"), sqlitestore.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	h := hub.New(st.ReadPage, e.hopts)
	st.SetNotify(func(c *store.Committed) { h.Publish(c.ThreadID, c.Before, c.Records) })
	svc := streams.New(st, h, e.opts)
	if err := svc.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.st, e.hub, e.svc = st, h, svc
	e.t.Cleanup(e.close)
}

func (e *env) close() {
	if e.svc == nil {
		return
	}
	e.svc.Close()
	e.hub.Close()
	e.st.Close()
	e.svc = nil
}

// reopen closes everything and opens the same store again (a restart).
func (e *env) reopen() {
	e.close()
	e.open()
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) create(req streams.CreateRequest) *streams.CreateResult {
	e.t.Helper()
	res, err := e.svc.Create(ctxT(e.t), req)
	if err != nil {
		e.t.Fatalf("create %s: %v", req.Path, err)
	}
	return res
}

func (e *env) append(path, ct, body string) *streams.AppendResult {
	e.t.Helper()
	res, err := e.svc.Append(ctxT(e.t), streams.AppendRequest{Path: path, ContentType: ct, Body: []byte(body)})
	if err != nil {
		e.t.Fatalf("append to %s: %v", path, err)
	}
	return res
}

// text reads a stream from offset to its tail as text.
func (e *env) text(path, offset string) (string, *streams.ReadResult) {
	e.t.Helper()
	var out []byte
	var last *streams.ReadResult
	for range 1000 {
		res, err := e.svc.Read(ctxT(e.t), path, offset)
		if err != nil {
			e.t.Fatalf("read %s from %s: %v", path, offset, err)
		}
		for _, it := range res.Items {
			out = append(out, it...)
		}
		last = res
		if res.UpToDate {
			return string(out), last
		}
		offset = res.Next
	}
	e.t.Fatal("the stream does not end")
	return "", nil
}

func wantCode(t *testing.T, err error, code streams.Code) {
	t.Helper()
	if streams.CodeOf(err) != code {
		t.Fatalf("err = %v (code %d), want code %d", err, streams.CodeOf(err), code)
	}
}
