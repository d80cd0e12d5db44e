package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/ssetest"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// storeHeld is a store whose reads (of a thread, its log, its runs, its
// checkpoint) wait while held, as a store that does not answer (a NATS
// server down, a thread whose load takes long) does.
type storeHeld struct {
	store.Store
	mu      sync.Mutex
	held    chan struct{} // closed to let reads through; nil when not held
	reading chan struct{} // gets a value each time a read starts waiting
	gaveUp  chan struct{} // gets a value each time a held read's context ends
}

func (h *storeHeld) hold() {
	h.mu.Lock()
	h.held = make(chan struct{})
	h.mu.Unlock()
}

func (h *storeHeld) release() {
	h.mu.Lock()
	if h.held != nil {
		close(h.held)
		h.held = nil
	}
	h.mu.Unlock()
}

func (h *storeHeld) wait(ctx context.Context) error {
	h.mu.Lock()
	held := h.held
	h.mu.Unlock()
	if held == nil {
		return nil
	}
	select {
	case h.reading <- struct{}{}:
	default:
	}
	select {
	case <-held:
		return nil
	case <-ctx.Done():
		select {
		case h.gaveUp <- struct{}{}:
		default:
		}
		return ctx.Err()
	}
}

func (h *storeHeld) ReadEvents(ctx context.Context, id string, after tether.Offset, limit int) ([]*tether.Record, error) {
	if err := h.wait(ctx); err != nil {
		return nil, err
	}
	return h.Store.ReadEvents(ctx, id, after, limit)
}

func (h *storeHeld) ReadPage(ctx context.Context, id string, after tether.Offset, limit, maxBytes int) ([]*tether.Record, bool, error) {
	if err := h.wait(ctx); err != nil {
		return nil, false, err
	}
	return h.Store.ReadPage(ctx, id, after, limit, maxBytes)
}

func (h *storeHeld) Thread(ctx context.Context, id string) (*store.ThreadRecord, error) {
	if err := h.wait(ctx); err != nil {
		return nil, err
	}
	return h.Store.Thread(ctx, id)
}

func (h *storeHeld) LoadThread(ctx context.Context, id string, limit int) (*store.ThreadLoad, error) {
	if err := h.wait(ctx); err != nil {
		return nil, err
	}
	return h.Store.LoadThread(ctx, id, limit)
}

func (h *storeHeld) Run(ctx context.Context, id string) (*store.RunRecord, error) {
	if err := h.wait(ctx); err != nil {
		return nil, err
	}
	return h.Store.Run(ctx, id)
}

func (h *storeHeld) Checkpoint(ctx context.Context, id string) (tether.Offset, []byte, error) {
	if err := h.wait(ctx); err != nil {
		return "", nil, err
	}
	return h.Store.Checkpoint(ctx, id)
}

// coldThread writes a thread with a finished run through one engine, and
// returns a server over a second engine that has never loaded it, whose
// store reads can be held, and an offset in the thread's log.
func coldThread(t *testing.T, opts api.Options) (*env, *storeHeld, tether.Offset) {
	t.Helper()
	v, h, cursor, _ := coldRun(t, opts)
	return v, h, cursor
}

// coldRun is coldThread that also returns the id of the thread's run.
func coldRun(t *testing.T, opts api.Options) (*env, *storeHeld, tether.Offset, string) {
	t.Helper()
	st := testutil.OpenStore(t, "")
	w := engine.New(st, engine.Options{AcceptAgent: func(string) bool { return true }})
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, _, err := w.CreateThread(ctx, "cold", nil); err != nil {
		t.Fatal(err)
	}
	rc, err := w.CreateRun(ctx, "cold", engine.RunRequest{Agent: "ext"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.CancelRun(ctx, rc.Run.ID); err != nil {
		t.Fatal(err)
	}
	w.Close()
	h := &storeHeld{Store: st, reading: make(chan struct{}, 1), gaveUp: make(chan struct{}, 1)}
	t.Cleanup(h.release)
	v := newEnvStore(t, h, opts, engine.Options{})
	return v, h, rc.Before, rc.Run.ID
}

// A stream resumed on a thread the node has not loaded gets its response
// head and ":ok" at once, while the store has not answered yet: a client
// can tell a slow server from a dead one. The rest follows once the store
// answers.
func TestSSEPreambleBeforeStoreRead(t *testing.T) {
	v, h, cursor := coldThread(t, api.Options{SubscribeTimeout: time.Minute})
	h.hold()
	s := openWhileHeld(t, http.DefaultClient, v.url+"/v1/threads/cold/events", cursor)
	h.release()
	f, err := s.Next()
	if err != nil || f.Event != "connected" {
		t.Fatalf("after :ok: %+v %v, want connected", f, err)
	}
	for {
		f, err := s.Next()
		if err != nil {
			t.Fatalf("the stream ended before run.finished: %v", err)
		}
		if f.Event == "run.finished" {
			break
		}
	}
}

// A client that leaves while its stream waits for the store ends the wait:
// the store read it was waiting on is given up.
func TestSSEClientLeavesWhileStoreHeld(t *testing.T) {
	v, h, cursor := coldThread(t, api.Options{SubscribeTimeout: time.Hour})
	h.hold()
	s, err := ssetest.Open(t.Context(), http.DefaultClient, v.url+"/v1/threads/cold/events", string(cursor))
	if err != nil {
		t.Fatal(err)
	}
	if f, err := s.Next(); err != nil || !f.IsComment {
		t.Fatalf("first frame %+v %v", f, err)
	}
	<-h.reading
	s.Close()
	select {
	case <-h.gaveUp:
	case <-time.After(30 * time.Second):
		t.Fatal("the store read went on after the client left")
	}
}

// A store that does not answer within SubscribeTimeout ends the stream,
// after ":ok", with reconnect (reason unavailable): the client resumes
// later, as after the 503 it used to get.
func TestSSEStoreNeverAnswers(t *testing.T) {
	v, h, cursor := coldThread(t, api.Options{SubscribeTimeout: 50 * time.Millisecond})
	h.hold()
	s, err := ssetest.Open(t.Context(), http.DefaultClient, v.url+"/v1/threads/cold/events", string(cursor))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	frames := readAllFrames(t, s)
	if len(frames) != 2 || !frames[0].IsComment || frames[0].Comment != "ok" || frames[1].Event != "reconnect" {
		t.Fatalf("frames %+v, want :ok then reconnect", frames)
	}
	var d struct {
		Reason string           `json:"reason"`
		Error  tether.ErrorInfo `json:"error"`
	}
	if err := json.Unmarshal([]byte(frames[1].Data), &d); err != nil || d.Reason != "unavailable" || d.Error.Code != "unavailable" || d.Error.Message == "" {
		t.Fatalf("reconnect data %s (%v), want reason and error unavailable", frames[1].Data, err)
	}
	// Once the store answers, the same request starts.
	h.release()
	s2, err := ssetest.Open(t.Context(), http.DefaultClient, v.url+"/v1/threads/cold/events", string(cursor))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	s2.Next()
	if f, err := s2.Next(); err != nil || f.Event != "connected" {
		t.Fatalf("after the store is back: %+v %v", f, err)
	}
}

// What can only be known from the store once the response has started (an
// unknown thread, run or message) ends the stream after ":ok" with end,
// reason error, and the error a JSON request gets: the client stops.
func TestSSEErrorAfterPreamble(t *testing.T) {
	v := newEnv(t, api.Options{})
	v.thread("t1")
	id := v.demoRun("t1", `{"tokens":2,"delay_ms":0}`)
	for _, c := range []struct{ name, path, code string }{
		{"unknown thread", "/v1/threads/nope/events", "not_found"},
		{"unknown run", "/v1/runs/run_nope/events", "not_found"},
		{"unknown message", "/v1/runs/" + id + "/events?message_id=zz", "not_found"},
	} {
		s, err := ssetest.Open(t.Context(), http.DefaultClient, v.url+c.path, "")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		frames := readAllFrames(t, s)
		s.Close()
		if len(frames) != 2 || !frames[0].IsComment || frames[1].Event != "end" {
			t.Fatalf("%s: frames %+v, want :ok then end", c.name, frames)
		}
		var d struct {
			Reason string           `json:"reason"`
			Error  tether.ErrorInfo `json:"error"`
		}
		if err := json.Unmarshal([]byte(frames[1].Data), &d); err != nil || d.Reason != "error" || d.Error.Code != c.code || d.Error.Message == "" {
			t.Errorf("%s: end data %s (%v), want reason error, code %s", c.name, frames[1].Data, err, c.code)
		}
		// The same request as JSON still gets the status.
		if r := v.do("GET", c.path, nil, "Accept", "application/json"); r.status != 404 || r.code() != c.code {
			t.Errorf("%s as JSON: %d %s", c.name, r.status, r.body)
		}
	}
}

func readAllFrames(t *testing.T, s *ssetest.Stream) []ssetest.Frame {
	t.Helper()
	var out []ssetest.Frame
	for {
		f, err := s.Next()
		if err != nil {
			return out
		}
		out = append(out, f)
	}
}

// openWhileHeld opens a stream while the store's reads are held, and
// checks that its response head and ":ok" come all the same. The stream
// is closed at the test's end.
func openWhileHeld(t *testing.T, hc *http.Client, url string, cursor tether.Offset) *ssetest.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	type opened struct {
		s   *ssetest.Stream
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		s, err := ssetest.Open(ctx, hc, url, string(cursor))
		ch <- opened{s, err}
	}()
	var s *ssetest.Stream
	select {
	case o := <-ch:
		if o.err != nil {
			t.Fatal(o.err)
		}
		s = o.s
	case <-time.After(10 * time.Second):
		t.Fatal("no response head while the store's reads are held")
	}
	t.Cleanup(s.Close)
	if f, err := s.Next(); err != nil || !f.IsComment || f.Comment != "ok" {
		t.Fatalf("first frame %+v %v, want :ok", f, err)
	}
	return s
}
