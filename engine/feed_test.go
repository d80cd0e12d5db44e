package engine_test

import (
	"context"
	"sync/atomic"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// cutFeed is a store whose feed of the log the test cuts and restores, as
// natsstore reports a node cut off from NATS: while it is cut the engine
// hears of no commit.
type cutFeed struct {
	store.Store
	cut  atomic.Bool
	feed func(store.FeedState)
}

func (c *cutFeed) SetNotify(fn func(*store.Committed)) {
	c.Store.SetNotify(func(x *store.Committed) {
		if !c.cut.Load() {
			fn(x)
		}
	})
}

func (c *cutFeed) SetFeedNotify(fn func(store.FeedState)) { c.feed = fn }

// A node back on the log after a cut-off so long that it may have missed
// a deletion (natsstore: the deleted thread's tombstone expired) forgets
// the threads it holds and reads them from the store again: a thread
// deleted meanwhile is not_found, as on every other node; one that was
// not is there as it was. It served the deleted thread from memory.
func TestForgetsThreadsAfterLongCutOff(t *testing.T) {
	st := &cutFeed{Store: testutil.OpenStore(t, "")}
	e := newEngine(t, st, engine.Options{})
	ctx := ctxT(t)
	for _, id := range []string{"t1", "t2"} {
		mustThread(t, e, id)
		if _, err := e.Thread(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	st.cut.Store(true)
	st.feed(store.FeedState{})
	// Another node's deletion, which this one does not hear of.
	if err := st.Store.DeleteThread(context.Background(), "t1"); err != nil {
		t.Fatal(err)
	}
	st.cut.Store(false)
	st.feed(store.FeedState{Following: true, Forget: true})
	if snap, err := e.Thread(ctx, "t1"); tether.CodeOf(err) != tether.CodeNotFound {
		t.Fatalf("the thread deleted while the node was cut off: %v %v, want not_found", snap, err)
	}
	if _, err := e.Thread(ctx, "t2"); err != nil {
		t.Fatalf("the thread not deleted: %v", err)
	}
	if !e.Following() {
		t.Fatal("the node does not follow the log again")
	}
}
