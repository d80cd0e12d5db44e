package api_test

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// laggingView is node b's view of a store shared with node a: every
// committed batch reaches both, but b's notifications can be held back, as
// when a node's consumer of a shared log stalls.
type laggingView struct {
	store.Store
	mu   sync.Mutex
	a, b func(*store.Committed)
	hold bool
	held []*store.Committed
}

type viewA struct{ *laggingView }

func (v viewA) SetNotify(fn func(*store.Committed)) { v.mu.Lock(); v.a = fn; v.mu.Unlock() }

func (v *laggingView) SetNotify(fn func(*store.Committed)) { v.mu.Lock(); v.b = fn; v.mu.Unlock() }

func (v *laggingView) notify(c *store.Committed) {
	v.mu.Lock()
	a, b := v.a, v.b
	if v.hold {
		v.held = append(v.held, c)
		b = nil
	}
	v.mu.Unlock()
	if a != nil {
		a(c)
	}
	if b != nil {
		b(c)
	}
}

func (v *laggingView) setHold(hold bool) {
	v.mu.Lock()
	v.hold = hold
	held := v.held
	v.held = nil
	b := v.b
	v.mu.Unlock()
	for _, c := range held {
		b(c)
	}
}

// TestPollOnLaggingNode: node b served a thread up to an offset, then read
// the store (for a cursor it had not seen) and so knows of a commit of
// node a that its fan-out has not been notified of yet. A poll without
// wait from the earlier offset answers with the new events once they
// reach b, never with nothing and "not up to date" (which would send the
// client into a busy loop).
func TestPollOnLaggingNode(t *testing.T) {
	st := testutil.OpenStore(t, "")
	v := &laggingView{Store: st}
	st.SetNotify(v.notify)
	opts := engine.Options{AcceptAgent: func(string) bool { return true }}
	a := engine.New(viewA{v}, opts)
	b := engine.New(v, opts)
	for _, e := range []*engine.Engine{a, b} {
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	srv := api.New(b, api.Options{})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { srv.Shutdown(); hs.Close(); a.Close(); b.Close() })
	ctx := t.Context()
	env := &env{t: t, url: hs.URL, e: b, st: st, srv: srv, hs: hs}

	if _, _, err := a.CreateThread(ctx, "t1", nil); err != nil {
		t.Fatal(err)
	}
	run, err := a.CreateRun(ctx, "t1", engine.RunRequest{Agent: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	type page struct {
		Events   []tether.Event `json:"events"`
		Next     tether.Offset  `json:"next_offset"`
		UpToDate bool           `json:"up_to_date"`
	}
	// b serves the thread up to the run's creation.
	var p page
	env.mustDo(200, "GET", "/v1/threads/t1/events?after=-1", nil, "Accept", "application/json").json(&p)
	if !p.UpToDate || len(p.Events) == 0 {
		t.Fatalf("b's first page: %+v", p)
	}
	seen := p.Next

	v.setHold(true)
	if _, err := a.CancelRun(ctx, run.Run.ID); err != nil {
		t.Fatal(err)
	}
	snap, err := a.Thread(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	tip := snap.Offset
	// A cursor b has not seen: b reads the store.
	env.mustDo(200, "GET", "/v1/threads/t1/events?after="+string(tip), nil, "Accept", "application/json")
	go func() {
		time.Sleep(200 * time.Millisecond)
		v.setHold(false)
	}()
	p = page{}
	env.mustDo(200, "GET", "/v1/threads/t1/events?after="+string(seen), nil, "Accept", "application/json").json(&p)
	if len(p.Events) == 0 && !p.UpToDate {
		t.Fatalf("b answered no events and not up to date (next_offset %s)", p.Next)
	}
	if len(p.Events) == 0 || p.Events[len(p.Events)-1].Offset != tip {
		t.Fatalf("b answered %d events up to %s, a's log ends at %s", len(p.Events), p.Next, tip)
	}
}
