package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"runtime"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/sqlitestore"
)

// A group is what the writer commits in one transaction: the batches of
// every caller that queued while it was busy. These tests stall the writer
// in the notify of a "stall" batch, queue batches behind it, and release
// it, so that the queued batches form one group.

type groupCommit struct {
	res *store.Result
	err error
}

// stalledGroup opens a store with threads a, b and c (version 1 each) and
// a writer held after committing a batch of thread "stall". queue queues a
// batch and returns once the writer's queue holds it; release lets the
// writer go on.
type stalledGroup struct {
	t       *testing.T
	s       *sqlitestore.Store
	path    string
	release chan struct{}
	stalled chan error
	queued  int
}

func newStalledGroup(t *testing.T) *stalledGroup {
	path := filepath.Join(t.TempDir(), "tether.db")
	s := open(t, path, sqlitestore.Options{})
	for _, id := range []string{"a", "b", "c"} {
		commitOne(t, s, id, true, 0)
	}
	g := &stalledGroup{t: t, s: s, path: path, release: make(chan struct{}), stalled: make(chan error, 1)}
	entered := make(chan struct{})
	s.SetNotify(func(c *store.Committed) {
		if c.ThreadID == "stall" {
			close(entered)
			<-g.release
		}
	})
	go func() { _, err := commitBatch(s, "stall", true, 0); g.stalled <- err }()
	<-entered
	return g
}

func (g *stalledGroup) queue(thread string, version int64) <-chan groupCommit {
	done := make(chan groupCommit, 1)
	go func() {
		res, err := commitBatch(g.s, thread, false, version)
		done <- groupCommit{res, err}
	}()
	g.queued++
	for sqlitestore.Queued(g.s) < g.queued {
		select {
		case c := <-done:
			g.t.Fatalf("a batch of %s returned before the writer was released: %+v", thread, c)
		default:
		}
		// The writer is stalled: the batch is on its way into the queue.
		runtime.Gosched()
	}
	return done
}

// run releases the writer and returns the transactions it ran for the
// queued batches.
func (g *stalledGroup) run(wait ...<-chan groupCommit) ([]groupCommit, int64) {
	before := sqlitestore.Transactions(g.s)
	close(g.release)
	if err := <-g.stalled; err != nil {
		g.t.Fatal(err)
	}
	out := make([]groupCommit, len(wait))
	for i, c := range wait {
		out[i] = <-c
	}
	return out, sqlitestore.Transactions(g.s) - before
}

// TestGroupCommitFailsWhole fails the COMMIT of a group of three threads'
// batches: each caller gets the error, none of the batches is written, and
// the store goes on from the state before the group.
func TestGroupCommitFailsWhole(t *testing.T) {
	g := newStalledGroup(t)
	ca, cb, cc := g.queue("a", 1), g.queue("b", 1), g.queue("c", 1)
	fault := errors.New("disk on fire")
	sqlitestore.SetCommitFault(g.s, func() error { return fault })
	got, txs := g.run(ca, cb, cc)
	if txs != 1 {
		t.Fatalf("the three batches took %d transactions, want 1", txs)
	}
	for i, c := range got {
		if !errors.Is(c.err, fault) {
			t.Errorf("batch %d: %+v, want the commit's error", i, c)
		}
	}
	sqlitestore.SetCommitFault(g.s, nil) // no transaction runs: all callers have their answer
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		tr, err := g.s.Thread(ctx, id)
		if err != nil || tr.Version != 1 {
			t.Fatalf("thread %s after the failed group: %+v %v", id, tr, err)
		}
		recs, err := g.s.ReadEvents(ctx, id, tether.OffsetStart, 10)
		if err != nil || len(recs) != 1 {
			t.Fatalf("log of %s after the failed group: %d records, %v", id, len(recs), err)
		}
		// The writer forgot what the failed group did: the same version
		// commits now.
		res := commitOne(t, g.s, id, false, 1)
		if res.Version != 2 || res.Before != recs[0].Offset {
			t.Fatalf("thread %s: commit after the failed group: %+v", id, res)
		}
	}
}

// TestGroupCommitConflictAlone puts a stale batch of thread a in a group
// with two batches of thread b and one of c: a alone is refused, b's two
// commit in their order, one after the other, and c commits.
func TestGroupCommitConflictAlone(t *testing.T) {
	g := newStalledGroup(t)
	var notified []string
	g.s.SetNotify(func(c *store.Committed) {
		if c.ThreadID == "stall" {
			<-g.release
			return
		}
		notified = append(notified, c.ThreadID) // the writer alone calls notify
	})
	// The notify function changed while the writer was held in the old
	// one, so the stall batch still uses the old one.
	ca := g.queue("a", 0) // stale: a is at version 1
	cb1 := g.queue("b", 1)
	cc := g.queue("c", 1)
	cb2 := g.queue("b", 2)
	got, txs := g.run(ca, cb1, cc, cb2)
	if txs != 1 {
		t.Fatalf("the four batches took %d transactions, want 1", txs)
	}
	if !errors.Is(got[0].err, store.ErrConflict) {
		t.Fatalf("stale batch of a: %+v, want ErrConflict", got[0])
	}
	for i, c := range got[1:] {
		if c.err != nil {
			t.Fatalf("batch %d: %v", i+1, c.err)
		}
	}
	b1, c1, b2 := got[1].res, got[2].res, got[3].res
	if b1.Version != 2 || b2.Version != 3 || c1.Version != 2 {
		t.Fatalf("versions: b %d then %d, c %d", b1.Version, b2.Version, c1.Version)
	}
	if b2.Before != b1.Records[0].Offset || b2.Records[0].Offset <= b1.Records[0].Offset {
		t.Fatalf("b's second batch does not follow its first: %+v after %+v", b2, b1)
	}
	if want := []string{"b", "c", "b"}; len(notified) != 3 || notified[0] != want[0] || notified[1] != want[1] || notified[2] != want[2] {
		t.Fatalf("notified %v, want %v", notified, want)
	}
	ctx := context.Background()
	for id, want := range map[string]int{"a": 1, "b": 3, "c": 2} {
		recs, err := g.s.ReadEvents(ctx, id, tether.OffsetStart, 10)
		if err != nil || len(recs) != want {
			t.Fatalf("log of %s: %d records, want %d (%v)", id, len(recs), want, err)
		}
	}
}

// queueDone queues an arbitrary call to the store as queue does a batch.
func (g *stalledGroup) queueDone(call func() error) <-chan groupCommit {
	done := make(chan groupCommit, 1)
	go func() { done <- groupCommit{err: call()} }()
	g.queued++
	for sqlitestore.Queued(g.s) < g.queued {
		runtime.Gosched()
	}
	return done
}

// eventRows counts the rows of the events table, whatever their thread.
func eventRows(t *testing.T, g *stalledGroup) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+g.path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestGroupCommitDeleteAfterAppend deletes a thread in the group that
// appends to it: the deletion takes the appended event too (the events of a
// group are inserted together, but before anything that deletes events).
func TestGroupCommitDeleteAfterAppend(t *testing.T) {
	g := newStalledGroup(t)
	rows := eventRows(t, g)
	ca := g.queue("a", 1)
	cb := g.queue("b", 1)
	cd := g.queueDone(func() error { return g.s.DeleteThread(context.Background(), "a") })
	got, txs := g.run(ca, cb, cd)
	if txs != 1 {
		t.Fatalf("the group took %d transactions, want 1", txs)
	}
	for i, c := range got {
		if c.err != nil {
			t.Fatalf("call %d: %v", i, c.err)
		}
	}
	// a's two events went with it; b gained one.
	if n := eventRows(t, g); n != rows-1+1 {
		t.Fatalf("%d event rows after the group, want %d", n, rows)
	}
	if _, err := g.s.Thread(context.Background(), "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted thread: %v", err)
	}
}

// TestGroupCommitSavepointKeepsOthers puts a batch whose run is refused
// (its idempotency key is another run's) between two batches of other
// threads: the refused batch is rolled back alone, and the events of the
// batches before and after it are committed.
func TestGroupCommitSavepointKeepsOthers(t *testing.T) {
	g := newStalledGroup(t)
	ctx := context.Background()
	run := func(id string) *store.RunRecord {
		return &store.RunRecord{Run: tether.Run{ID: id, ThreadID: "b", Status: tether.RunPending}, IdempotencyKey: "k", Multitask: tether.MultitaskEnqueue}
	}
	ca := g.queue("a", 1)
	ev := &tether.Event{Type: tether.EventCustom, TS: tether.Now()}
	enc, _ := ev.Encode()
	cb := g.queueDone(func() error {
		_, err := g.s.Commit(ctx, &store.Batch{ThreadID: "b", Version: 1, Events: []*tether.Event{ev}, Encoded: [][]byte{enc},
			Runs: []*store.RunRecord{run("r1")}})
		return err
	})
	cb2 := g.queueDone(func() error {
		ev := &tether.Event{Type: tether.EventCustom, TS: tether.Now()}
		enc, _ := ev.Encode()
		_, err := g.s.Commit(ctx, &store.Batch{ThreadID: "b", Version: 2, Events: []*tether.Event{ev}, Encoded: [][]byte{enc},
			Runs: []*store.RunRecord{run("r2")}})
		return err
	})
	cc := g.queue("c", 1)
	got, txs := g.run(ca, cb, cb2, cc)
	if txs != 1 {
		t.Fatalf("the group took %d transactions, want 1", txs)
	}
	if got[0].err != nil || got[1].err != nil || got[3].err != nil {
		t.Fatalf("a: %v, b with r1: %v, c: %v", got[0].err, got[1].err, got[3].err)
	}
	if !errors.Is(got[2].err, store.ErrExists) {
		t.Fatalf("b with r2, whose key is r1's: %v, want ErrExists", got[2].err)
	}
	for id, want := range map[string]int{"a": 2, "b": 2, "c": 2} {
		recs, err := g.s.ReadEvents(ctx, id, tether.OffsetStart, 10)
		if err != nil || len(recs) != want {
			t.Fatalf("log of %s: %d records, want %d (%v)", id, len(recs), want, err)
		}
	}
	if _, err := g.s.Run(ctx, "r2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("refused run r2: %v", err)
	}
}
