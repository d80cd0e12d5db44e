package runner_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/agents/demo"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// failing is a store whose next commits (fails of them) that hold an
// event of type typ fail unavailable, as a JetStream store's do while it
// has no quorum.
type failing struct {
	store.Store
	typ   string
	fails atomic.Int32
}

func (f *failing) Commit(ctx context.Context, b *store.Batch) (*store.Result, error) {
	for _, ev := range b.Events {
		if ev.Type == f.typ && f.fails.Add(-1) >= 0 {
			return nil, store.ErrUnavailable
		}
	}
	return f.Store.Commit(ctx, b)
}

// A claim that fails because the store is unavailable for a while does
// not stop the runner: once the store is back, runs start again without
// a restart (operations.md, "Two of three down").
func TestClaimSurvivesAStoreOutage(t *testing.T) {
	st := &failing{Store: testutil.OpenStore(t, ""), typ: tether.EventRunStarted}
	st.fails.Store(1)
	ok := agents.Func(func(ctx context.Context, s *agents.Session) error { return nil })
	e, _ := worldOn(t, st, map[string]agents.Agent{"ok": ok}, engine.Options{})
	run := start(t, e, "ok", `{}`)
	waitStatus(t, e, run.ID, tether.RunDone)
}

// flaky is a store whose commits that hold an event of type typ fail
// unavailable, the kth of them (from 1) when fail(k) says so: before
// committing, or after (lost: the batch is in the log, but the engine
// hears of a failure, as when JetStream's acknowledgement is lost).
type flaky struct {
	store.Store
	typ  string
	fail func(k int) (fails, lost bool)
	n    atomic.Int32
}

func (f *flaky) Commit(ctx context.Context, b *store.Batch) (*store.Result, error) {
	if !slices.ContainsFunc(b.Events, func(ev *tether.Event) bool { return ev.Type == f.typ }) {
		return f.Store.Commit(ctx, b)
	}
	fails, lost := f.fail(int(f.n.Add(1)))
	switch {
	case !fails:
		return f.Store.Commit(ctx, b)
	case lost:
		if _, err := f.Store.Commit(ctx, b); err != nil {
			return nil, err
		}
	}
	return nil, store.ErrUnavailable
}

// demoEvents runs the demo agent on st, following the run from the start
// of the thread's log, and returns what its follower saw, what the log
// holds and the run as it ended. Each event is told by its type and
// content, not its IDs (which name the run).
func demoEvents(t *testing.T, st store.Store) (seen, logged []string, run tether.Run) {
	t.Helper()
	e, _ := worldOn(t, st, map[string]agents.Agent{"demo": demo.New()}, engine.Options{LeaseTTL: time.Hour})
	ctx := context.Background()
	if _, _, err := e.CreateThread(ctx, "t1", nil); err != nil {
		t.Fatal(err)
	}
	sub, err := e.Subscribe(ctx, engine.SubscribeRequest{ThreadID: "t1", Cursor: tether.OffsetStart})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	rc, err := e.CreateRun(ctx, "t1", engine.RunRequest{Agent: "demo", Metadata: []byte(`{"demo":{"tokens":30,"delay_ms":0}}`),
		Input: tether.RunInput{Messages: []tether.InputMessage{{Role: tether.RoleUser, Content: "why"}}}})
	if err != nil {
		t.Fatal(err)
	}
	tell := func(r *tether.Record) string {
		ev, err := r.Decode()
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%s %q %s %s %s %s", ev.Type, ev.Delta, ev.Status, ev.Name, ev.Role, ev.Error)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for done := false; !done; {
		recs, err := sub.Next(wctx)
		if err != nil {
			t.Fatalf("follow the thread: %v (after %d events)", err, len(seen))
		}
		for _, r := range recs {
			seen = append(seen, tell(r))
			done = done || r.Type == tether.EventRunFinished
		}
	}
	recs, err := st.ReadEvents(ctx, "t1", tether.OffsetStart, 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		logged = append(logged, tell(r))
	}
	snap, err := e.Run(ctx, rc.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	return seen, logged, snap.Runs[0]
}

// An in-process run rides out a store that fails some of its appends
// (unavailable), some after committing them: the run ends done, and the
// log and its follower hold every event of the agent once, in order, as
// on a store that never failed. The run ended error (agent_error, "The
// agent failed.") at the first failure.
func TestRunSurvivesFailedAppends(t *testing.T) {
	_, want, _ := demoEvents(t, testutil.OpenStore(t, ""))
	st := &flaky{Store: testutil.OpenStore(t, ""), typ: tether.EventTextDelta, fail: func(k int) (bool, bool) {
		switch k {
		case 2, 5, 9, 10, 11: // 9, 10 and 11: one append that fails three times
			return true, false
		case 3, 6, 14, 15: // 14, 15: lost, then the next append fails
			return true, true
		}
		return false, false
	}}
	seen, logged, run := demoEvents(t, st)
	if run.Status != tether.RunDone {
		t.Fatalf("run %s %+v, want done", run.Status, run.Error)
	}
	if !slices.Equal(logged, want) {
		t.Fatalf("the log holds\n%s\nwant\n%s", strings.Join(logged, "\n"), strings.Join(want, "\n"))
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("the follower saw\n%s\nwant\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
}
