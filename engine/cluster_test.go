package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// shared lets several engines use one store, as nodes of a cluster do:
// each gets a view whose notify function receives every committed batch.
type shared struct {
	store.Store
	mu  sync.Mutex
	fns map[int]func(*store.Committed)
}

type nodeView struct {
	*shared
	id int
}

func newShared(st store.Store) *shared {
	s := &shared{Store: st, fns: map[int]func(*store.Committed){}}
	st.SetNotify(func(c *store.Committed) {
		s.mu.Lock()
		fns := make([]func(*store.Committed), 0, len(s.fns))
		for i := 0; i < len(s.fns)+8; i++ {
			if fn := s.fns[i]; fn != nil {
				fns = append(fns, fn)
			}
		}
		s.mu.Unlock()
		for _, fn := range fns {
			fn(c)
		}
	})
	return s
}

func (v nodeView) SetNotify(fn func(*store.Committed)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.fns[v.id] = fn
}

// cluster starts n engines on one store.
func cluster(t *testing.T, n int, opts engine.Options) ([]*engine.Engine, store.Store) {
	st := testutil.OpenStore(t, "")
	sh := newShared(st)
	es := make([]*engine.Engine, n)
	for i := range es {
		o := opts
		o.NodeID = fmt.Sprintf("node-%d", i)
		es[i] = newEngine(t, nodeView{sh, i}, o)
	}
	return es, st
}

// TestClusterAppendsFromBothNodes: one worker's appends alternate between
// two nodes (a load balancer): every append lands once, in order, although
// each node validates on state the other just changed.
func TestClusterAppendsFromBothNodes(t *testing.T) {
	es, st := cluster(t, 2, engine.Options{})
	a, b := es[0], es[1]
	ctx := ctxT(t)
	mustThread(t, a, "t1")
	// Created on a, claimed through b: b learns of the run from a's commit.
	run := mustRun(t, a, "t1", engine.RunRequest{Input: userInput("hi")})
	c, err := b.Claim(ctx, engine.ClaimRequest{WorkerID: "w", Agents: []string{"echo"}, Wait: 5 * time.Second})
	if err != nil || c == nil || c.Run.ID != run.ID {
		t.Fatalf("claim on the other node: %+v %v", c, err)
	}
	// The lease was granted on b; appends go to a and b in turn.
	nodes := []*engine.Engine{a, b}
	if _, err := nodes[0].Append(ctx, run.ID, c.Lease.Token, []*tether.Event{{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant}}); err != nil {
		t.Fatalf("append on the node that did not grant the lease: %v", err)
	}
	var want string
	for i := 0; i < 40; i++ {
		d := fmt.Sprintf("%d ", i)
		want += d
		if _, err := nodes[i%2].Append(ctx, run.ID, c.Lease.Token, []*tether.Event{{Type: tether.EventTextDelta, MessageID: "m1", Delta: d}}); err != nil {
			t.Fatalf("append %d on node %d: %v", i, i%2, err)
		}
	}
	if _, err := b.Append(ctx, run.ID, c.Lease.Token, []*tether.Event{{Type: tether.EventMessageFinished, MessageID: "m1", Status: "done"}, finished(tether.RunDone)}); err != nil {
		t.Fatal(err)
	}
	for i, e := range es {
		testutil.Eventually(t, 5*time.Second, "final answer on every node", func() bool {
			fa, err := e.FinalAnswer(ctx, "t1", "")
			return err == nil && fa.Complete && fa.Content == want
		})
		snap, _ := e.Thread(ctx, "t1")
		if snap.Thread.Status != tether.ThreadIdle || len(snap.Messages) != 2 {
			t.Fatalf("node %d: %+v", i, snap.Thread)
		}
	}
	if got := len(readAll(t, st, "t1")); got != 3+1+40+2 {
		t.Fatalf("log has %d events", got)
	}
}

// TestClusterConcurrentAppendsOneRun: both nodes take appends to one run at
// the same time, which makes their commits race in the store: each append
// still lands exactly once.
func TestClusterConcurrentAppendsOneRun(t *testing.T) {
	es, st := cluster(t, 2, engine.Options{})
	ctx := ctxT(t)
	mustThread(t, es[0], "t1")
	run := mustRun(t, es[0], "t1", engine.RunRequest{})
	c := mustClaim(t, es[0], "echo")
	const each = 30
	var wg sync.WaitGroup
	for n, e := range es {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("m%d", n)
			if _, err := e.Append(context.Background(), run.ID, c.Lease.Token, []*tether.Event{{Type: tether.EventMessageStarted, MessageID: id, Role: tether.RoleAssistant}}); err != nil {
				t.Error(err)
				return
			}
			for i := 0; i < each; i++ {
				if _, err := e.Append(context.Background(), run.ID, c.Lease.Token, []*tether.Event{{Type: tether.EventTextDelta, MessageID: id, Delta: fmt.Sprintf("%d,", i)}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var want string
	for i := 0; i < each; i++ {
		want += fmt.Sprintf("%d,", i)
	}
	got := map[string]string{}
	for _, ev := range readAll(t, st, "t1") {
		if ev.Type == tether.EventTextDelta {
			got[ev.MessageID] += ev.Delta
		}
	}
	if got["m0"] != want || got["m1"] != want {
		t.Fatalf("m0 %q\nm1 %q\nwant %q", got["m0"], got["m1"], want)
	}
	for _, e := range es {
		testutil.Eventually(t, 5*time.Second, "snapshots agree", func() bool {
			snap, _ := e.Thread(ctx, "t1")
			return len(snap.Messages) == 2 && snap.Messages[0].Parts[0].Text == want && snap.Messages[1].Parts[0].Text == want
		})
	}
}

// TestClusterOneActiveRun: creates race on both nodes; exactly one wins.
func TestClusterOneActiveRun(t *testing.T) {
	es, _ := cluster(t, 2, engine.Options{})
	mustThread(t, es[0], "t1")
	var mu sync.Mutex
	created, active := 0, 0
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := es[i%2].CreateRun(context.Background(), "t1", engine.RunRequest{Agent: "echo"})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case tether.CodeOf(err) == tether.CodeRunActive:
				active++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if created != 1 || active != 9 {
		t.Fatalf("%d created, %d run_active", created, active)
	}
}

// TestClusterNodeDies: a node's in-process run outlives the node; a
// surviving node ends it aborted, once, when its lease expires.
func TestClusterNodeDies(t *testing.T) {
	clock := testutil.NewClock()
	es, st := cluster(t, 3, engine.Options{LeaseTTL: 30 * time.Second, SweepInterval: 10 * time.Millisecond, Now: clock.Now})
	ctx := ctxT(t)
	mustThread(t, es[0], "t1")
	run := mustRun(t, es[0], "t1", engine.RunRequest{Agent: "demo"})
	c, err := es[0].Claim(ctx, engine.ClaimRequest{WorkerID: "inproc@node-0", Agents: []string{"demo"}, Local: true, Wait: time.Second})
	if err != nil || c == nil {
		t.Fatal(err)
	}
	mustAppend(t, es[0], c, &tether.Event{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant})
	es[0].Close() // node 0 dies; nodes 1 and 2 both sweep
	clock.Advance(31 * time.Second)
	testutil.Eventually(t, 10*time.Second, "run aborted", func() bool {
		snap, err := es[1].Run(ctx, run.ID)
		return err == nil && snap.Runs[0].Status == tether.RunAborted
	})
	time.Sleep(300 * time.Millisecond) // let both sweepers have their go
	n := 0
	for _, ev := range readAll(t, st, "t1") {
		if ev.Type == tether.EventRunFinished {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d run.finished events, want 1", n)
	}
}

// TestClusterForeignAgainAfterResync: a node that finds another node's
// events in its thread catches up and validates again; when the other node
// commits once more in between, it catches up again rather than answer
// with the internal "events of another node" (which reached clients).
func TestClusterForeignAgainAfterResync(t *testing.T) {
	es, _ := cluster(t, 2, engine.Options{})
	a, b := es[0], es[1]
	ctx := ctxT(t)
	mustThread(t, a, "t1")
	run := mustRun(t, a, "t1", engine.RunRequest{})
	c := mustClaim(t, a, "echo")
	appendOn := func(e *engine.Engine, id string) *engine.AppendResult {
		t.Helper()
		res, err := e.Append(ctx, run.ID, c.Lease.Token, []*tether.Event{{Type: tether.EventMessageStarted, MessageID: id, Role: tether.RoleAssistant}})
		if err != nil {
			t.Fatalf("append %s: %v", id, err)
		}
		return res
	}
	// folded waits until b's state has a's last event.
	folded := func(last tether.Offset) {
		testutil.Eventually(t, 5*time.Second, "b has a's events", func() bool {
			snap, err := b.Thread(ctx, "t1")
			return err == nil && snap.Thread.LastOffset == last
		})
	}
	if _, err := b.Thread(ctx, "t1"); err != nil { // b has the thread in memory
		t.Fatal(err)
	}
	res := appendOn(a, "m0") // which b folds, but did not write
	folded(res.NextOffset)
	n := 0
	engine.SetAfterResync(b, func() {
		if n++; n == 1 {
			res := appendOn(a, "m1")
			folded(res.NextOffset)
		}
	})
	appendOn(b, "m2")
	if n < 2 {
		t.Fatalf("b caught up %d time(s), want 2", n)
	}
	snap, err := a.Thread(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range snap.Messages {
		ids = append(ids, m.ID)
	}
	if fmt.Sprint(ids) != "[m0 m1 m2]" {
		t.Fatalf("messages %v, want [m0 m1 m2]", ids)
	}
}
