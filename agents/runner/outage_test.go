package runner_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/agents/demo"
	"github.com/tetherhq/tether/agents/runner"
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
func demoEvents(t *testing.T, st store.Store, opts engine.Options) (seen, logged []string, run tether.Run) {
	t.Helper()
	e, _ := worldOn(t, st, map[string]agents.Agent{"demo": demo.New()}, opts)
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
	_, want, _ := demoEvents(t, testutil.OpenStore(t, ""), engine.Options{})
	st := &flaky{Store: testutil.OpenStore(t, ""), typ: tether.EventTextDelta, fail: func(k int) (bool, bool) {
		switch k {
		case 2, 5, 9, 10, 11: // 9, 10 and 11: one append that fails three times
			return true, false
		case 3, 6, 14, 15: // 14, 15: lost, then the next append fails
			return true, true
		}
		return false, false
	}}
	seen, logged, run := demoEvents(t, st, engine.Options{LeaseTTL: time.Hour})
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

// An append the store keeps failing for several lease TTLs is sent again
// all along, its run's heartbeats renewing the lease meanwhile: the run
// ends done, with every event once.
func TestLeaseRenewedWhileAppendRetried(t *testing.T) {
	_, want, _ := demoEvents(t, testutil.OpenStore(t, ""), engine.Options{})
	st := &flaky{Store: testutil.OpenStore(t, ""), typ: tether.EventTextDelta, fail: func(k int) (bool, bool) {
		return k >= 2 && k <= 6, k == 2 // 3.1 s of pauses
	}}
	_, logged, run := demoEvents(t, st, engine.Options{LeaseTTL: time.Second, SweepInterval: 50 * time.Millisecond})
	if run.Status != tether.RunDone {
		t.Fatalf("run %s %+v, want done", run.Status, run.Error)
	}
	if !slices.Equal(logged, want) {
		t.Fatalf("the log holds\n%s\nwant\n%s", strings.Join(logged, "\n"), strings.Join(want, "\n"))
	}
}

// down is a store that fails every commit, and the reads that find a
// run and load a thread, while it is down: the engine cannot tell
// whether a lease expired.
type down struct {
	store.Store
	down atomic.Bool
}

func (d *down) Commit(ctx context.Context, b *store.Batch) (*store.Result, error) {
	if d.down.Load() {
		return nil, store.ErrUnavailable
	}
	return d.Store.Commit(ctx, b)
}

func (d *down) LoadThread(ctx context.Context, id string, limit int) (*store.ThreadLoad, error) {
	if d.down.Load() {
		return nil, store.ErrUnavailable
	}
	return d.Store.LoadThread(ctx, id, limit)
}

func (d *down) Run(ctx context.Context, id string) (*store.RunRecord, error) {
	if d.down.Load() {
		return nil, store.ErrUnavailable
	}
	return d.Store.Run(ctx, id)
}

// An append the store cannot take stops being sent once the lease has
// certainly expired (two TTLs after it was last renewed; its heartbeats
// failing too, and the engine unable to tell): the agent gets
// lease_lost and its context ends, and once the store is back the run
// ends aborted (worker_lost), as a worker's would.
func TestAppendGivesUpWithTheLease(t *testing.T) {
	st := &down{Store: testutil.OpenStore(t, "")}
	got := make(chan error, 1)
	agent := agents.Func(func(ctx context.Context, s *agents.Session) error {
		id, err := s.StartMessage(ctx, tether.RoleAssistant)
		if err != nil {
			return err
		}
		st.down.Store(true)
		err = s.Text(ctx, id, "lost")
		got <- err
		if ctx.Err() == nil {
			t.Errorf("the agent's context is still live after %v", err)
		}
		return err
	})
	e, _ := worldOn(t, st, map[string]agents.Agent{"a": agent}, engine.Options{LeaseTTL: 300 * time.Millisecond, SweepInterval: 50 * time.Millisecond})
	run := start(t, e, "a", `{}`)
	var err error
	select {
	case err = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the append is still being sent 20s after the store went down")
	}
	if tether.CodeOf(err) != tether.CodeLeaseLost {
		t.Fatalf("the append failed with %v, want lease_lost", err)
	}
	st.down.Store(false)
	snap := waitStatus(t, e, run.ID, tether.RunAborted)
	if r := snap.Runs[0]; r.Error == nil || r.Error.Code != engine.ReasonWorkerLost {
		t.Fatalf("run ended %+v, want worker_lost", r.Error)
	}
}

// levels is a slog handler that keeps the level of each "claim" record.
type levels struct {
	mu  sync.Mutex
	got []slog.Level
}

func (h *levels) Enabled(context.Context, slog.Level) bool { return true }
func (h *levels) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "claim" {
		h.mu.Lock()
		h.got = append(h.got, r.Level)
		h.mu.Unlock()
	}
	return nil
}
func (h *levels) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *levels) WithGroup(string) slog.Handler      { return h }

// A single failed claim is logged as an error, whichever of the runner's
// claimers it befalls (only the first claimer's were, and a run is taken
// by whichever claimer pops it).
func TestFailedClaimLoggedAsError(t *testing.T) {
	for i := range 4 {
		st := &failing{Store: testutil.OpenStore(t, ""), typ: tether.EventRunStarted}
		st.fails.Store(1)
		e := engine.New(st, engine.Options{})
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		h := &levels{}
		ok := agents.Func(func(ctx context.Context, s *agents.Session) error { return nil })
		rn := runner.New(e, map[string]agents.Agent{"ok": ok}, runner.Options{Logger: slog.New(h)})
		rn.Start()
		run := start(t, e, "ok", `{}`)
		waitStatus(t, e, run.ID, tether.RunDone)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rn.Shutdown(ctx)
		cancel()
		e.Close()
		h.mu.Lock()
		got := slices.Clone(h.got)
		h.mu.Unlock()
		if !slices.Equal(got, []slog.Level{slog.LevelError}) {
			t.Fatalf("try %d: the failed claim was logged at %v, want once at ERROR", i, got)
		}
	}
}
