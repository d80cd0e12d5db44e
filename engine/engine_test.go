package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

func TestRunLifecycle(t *testing.T) {
	e, st := setup(t)
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	run := mustRun(t, e, "t1", engine.RunRequest{Input: userInput("hi")})
	if run.Status != tether.RunPending || run.ThreadID != "t1" {
		t.Fatalf("new run: %+v", run)
	}
	c := mustClaim(t, e, "echo")
	if c.Run.ID != run.ID || c.Run.Status != tether.RunRunning || c.Run.Attempt != 1 || len(c.Messages) != 1 {
		t.Fatalf("claim: %+v", c)
	}
	res := mustAppend(t, e, c, answer("m1", "Hello ", "world")...)
	if !res.NextOffset.IsEvent() || res.CancelRequested {
		t.Fatalf("append result: %+v", res)
	}
	snap, _ := e.Thread(ctx, "t1")
	if snap.Thread.Status != tether.ThreadBusy || snap.Thread.ActiveRunID != run.ID {
		t.Fatalf("thread while running: %+v", snap.Thread)
	}
	mustAppend(t, e, c, finished(tether.RunDone))

	snap, err := e.Thread(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Thread.Status != tether.ThreadIdle || snap.Thread.ActiveRunID != "" {
		t.Fatalf("thread after run: %+v", snap.Thread)
	}
	if len(snap.Runs) != 1 || snap.Runs[0].Status != tether.RunDone || snap.Runs[0].CompletedAt.IsZero() {
		t.Fatalf("runs: %+v", snap.Runs)
	}
	if len(snap.Messages) != 2 || snap.Messages[1].Parts[0].Text != "Hello world" {
		t.Fatalf("messages: %+v", snap.Messages)
	}
	log := readAll(t, st, "t1")
	want := "run.created message.created run.started message.started text.delta text.delta message.finished run.finished"
	if got := types(log); got != want {
		t.Fatalf("log:\n got %s\nwant %s", got, want)
	}
	if snap.Offset != log[len(log)-1].Offset || snap.Thread.LastOffset != snap.Offset {
		t.Fatalf("snapshot offset %s, last event %s", snap.Offset, log[len(log)-1].Offset)
	}
	fa, err := e.FinalAnswer(ctx, "t1", "")
	if err != nil || fa.Content != "Hello world" || !fa.Complete || fa.RunID != run.ID || fa.MessageID != "m1" {
		t.Fatalf("final answer: %+v, %v", fa, err)
	}
	// The thread row in the store agrees with the fold.
	rec, _ := st.Thread(ctx, "t1")
	if rec.Thread.Status != tether.ThreadIdle || rec.Thread.LastOffset != snap.Offset || rec.Version != int64(len(log)) {
		t.Fatalf("stored row: %+v", rec)
	}
	// A finished run takes no more events.
	_, err = e.Append(ctx, c.Run.ID, c.Lease.Token, answer("m2", "late"))
	wantCode(t, err, tether.CodeConflict)
	if n := len(readAll(t, st, "t1")); n != len(log) {
		t.Fatalf("log grew to %d after a rejected append", n)
	}
}

func TestCreateThread(t *testing.T) {
	e, _ := setup(t)
	ctx := ctxT(t)
	th, created, err := e.CreateThread(ctx, "t1", json.RawMessage(`{"a": 1}`))
	if err != nil || !created || th.Status != tether.ThreadIdle || th.LastOffset != tether.OffsetStart {
		t.Fatalf("create: %+v %v %v", th, created, err)
	}
	if _, created, err := e.CreateThread(ctx, "t1", json.RawMessage(`{"a":1}`)); err != nil || created {
		t.Fatalf("same metadata again: created=%v err=%v", created, err)
	}
	_, _, err = e.CreateThread(ctx, "t1", json.RawMessage(`{"a":2}`))
	wantCode(t, err, tether.CodeConflict)
	_, _, err = e.CreateThread(ctx, "bad/id", nil)
	wantCode(t, err, tether.CodeBadRequest)
	th, _, err = e.CreateThread(ctx, "", nil)
	if err != nil || !strings.HasPrefix(th.ID, "thr_") {
		t.Fatalf("generated id: %+v %v", th, err)
	}
	_, err = e.Thread(ctx, "nope")
	wantCode(t, err, tether.CodeNotFound)
}

func TestMultitask(t *testing.T) {
	e, _ := setup(t)
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	first := mustRun(t, e, "t1", engine.RunRequest{})

	_, err := e.CreateRun(ctx, "t1", engine.RunRequest{Agent: "echo"})
	wantCode(t, err, tether.CodeRunActive)

	second := mustRun(t, e, "t1", engine.RunRequest{Multitask: tether.MultitaskEnqueue})
	if second.Status != tether.RunPending {
		t.Fatalf("enqueued: %+v", second)
	}
	c := mustClaim(t, e, "echo")
	if c.Run.ID != first.ID {
		t.Fatalf("claimed %s, want the first run %s", c.Run.ID, first.ID)
	}
	// The second run cannot start while the first is active.
	if c2, err := e.Claim(ctx, engine.ClaimRequest{WorkerID: "w2", Agents: []string{"echo"}, Wait: 50 * time.Millisecond}); c2 != nil || err != nil {
		t.Fatalf("claimed %v while a run is active (err %v)", c2, err)
	}
	mustAppend(t, e, c, finished(tether.RunDone))
	c2 := mustClaim(t, e, "echo")
	if c2.Run.ID != second.ID {
		t.Fatalf("next claim %s, want %s", c2.Run.ID, second.ID)
	}

	// interrupt: the active run gets a cancel request; the new one waits.
	third := mustRun(t, e, "t1", engine.RunRequest{Multitask: tether.MultitaskInterrupt})
	res := mustAppend(t, e, c2, &tether.Event{Type: tether.EventCustom, Name: "x"})
	if !res.CancelRequested {
		t.Fatal("interrupted run was not asked to cancel")
	}
	mustAppend(t, e, c2, finished(tether.RunCancelled))
	c3 := mustClaim(t, e, "echo")
	if c3.Run.ID != third.ID {
		t.Fatalf("after interrupt claimed %s, want %s", c3.Run.ID, third.ID)
	}
	_, err = e.CreateRun(ctx, "t1", engine.RunRequest{Agent: "echo", Multitask: "sometimes"})
	wantCode(t, err, tether.CodeBadRequest)
}

func TestConcurrentCreateRunOneActive(t *testing.T) {
	e, _ := setup(t)
	mustThread(t, e, "t1")
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, active := 0, 0
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.CreateRun(context.Background(), "t1", engine.RunRequest{Agent: "echo"})
			mu.Lock()
			defer mu.Unlock()
			switch tether.CodeOf(err) {
			case tether.CodeRunActive:
				active++
			default:
				if err == nil {
					ok++
				} else {
					t.Errorf("create: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if ok != 1 || active != 19 {
		t.Fatalf("%d created, %d run_active; want 1 and 19", ok, active)
	}
}

func TestIdempotencyKey(t *testing.T) {
	e, st := setup(t)
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	req := engine.RunRequest{Agent: "echo", IdempotencyKey: "k1", Input: userInput("hi")}
	a, err := e.CreateRun(ctx, "t1", req)
	if err != nil || !a.Created {
		t.Fatalf("first: %+v %v", a, err)
	}
	b, err := e.CreateRun(ctx, "t1", req)
	if err != nil || b.Created || b.Run.ID != a.Run.ID {
		t.Fatalf("retry: %+v %v", b, err)
	}
	if n := len(readAll(t, st, "t1")); n != 2 {
		t.Fatalf("log has %d events, want 2 (run.created, message.created)", n)
	}
	// After a restart of the engine, the key still finds the run.
	e.Close()
	e2 := newEngine(t, st, engine.Options{})
	c, err := e2.CreateRun(ctx, "t1", req)
	if err != nil || c.Created || c.Run.ID != a.Run.ID {
		t.Fatalf("after restart: %+v %v", c, err)
	}
}

func TestLeases(t *testing.T) {
	st := testutil.OpenStore(t, "")
	sw := &sweepWatch{Store: st}
	clock := testutil.NewClock()
	e := newEngine(t, sw, engine.Options{LeaseTTL: 30 * time.Second, SweepInterval: 10 * time.Millisecond, Now: clock.Now})
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	mustRun(t, e, "t1", engine.RunRequest{})
	c := mustClaim(t, e, "echo")
	mustAppend(t, e, c, &tether.Event{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant})

	_, err := e.Append(ctx, c.Run.ID, "wrong-token", answer("m2", "x"))
	wantCode(t, err, tether.CodeLeaseLost)
	_, err = e.Heartbeat(ctx, c.Run.ID, engine.Holder{})
	wantCode(t, err, tether.CodeLeaseLost)
	_, err = e.Heartbeat(ctx, "run_nope", engine.Holder{Token: c.Lease.Token})
	wantCode(t, err, tether.CodeNotFound)

	// Heartbeats keep the run alive past its TTL.
	for i := 0; i < 8; i++ {
		clock.Advance(20 * time.Second)
		sw.swept(t) // the sweeper has its go
		if _, err := e.Heartbeat(ctx, c.Run.ID, engine.Holder{Token: c.Lease.Token}); err != nil {
			t.Fatalf("heartbeat %d: %v", i, err)
		}
	}
	// Then the worker goes silent: the sweeper aborts the run and its
	// running message in one append.
	clock.Advance(31 * time.Second)
	testutil.Eventually(t, 5*time.Second, "run aborted", func() bool {
		snap, _ := e.Run(ctx, c.Run.ID)
		return snap.Runs[0].Status == tether.RunAborted
	})
	snap, _ := e.Run(ctx, c.Run.ID)
	r := snap.Runs[0]
	if r.Error == nil || r.Error.Code != "worker_lost" {
		t.Fatalf("run error: %+v", r.Error)
	}
	if m := snap.Messages[len(snap.Messages)-1]; m.ID != "m1" || m.Status != tether.MessageAborted {
		t.Fatalf("running message not aborted: %+v", m)
	}
	log := readAll(t, st, "t1")
	if last := log[len(log)-1]; last.Type != tether.EventRunFinished || last.Status != "aborted" {
		t.Fatalf("last event: %+v", last)
	}
	_, err = e.Append(ctx, c.Run.ID, c.Lease.Token, answer("m3", "late"))
	wantCode(t, err, tether.CodeLeaseLost)
}

func TestRestartAbortsLocalRuns(t *testing.T) {
	dir := t.TempDir()
	st := testutil.OpenStore(t, dir)
	e := engine.New(st, engine.Options{NodeID: "n1"})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	mustThread(t, e, "local")
	mustThread(t, e, "remote")
	mustThread(t, e, "queued")
	mustRun(t, e, "local", engine.RunRequest{Agent: "demo"})
	mustRun(t, e, "remote", engine.RunRequest{Agent: "echo"})
	lc, err := e.Claim(ctx, engine.ClaimRequest{WorkerID: "inproc", Agents: []string{"demo"}, Local: true, Wait: time.Second})
	if err != nil || lc == nil {
		t.Fatal(err)
	}
	rc := mustClaim(t, e, "echo")
	mustAppend(t, e, lc, &tether.Event{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant},
		&tether.Event{Type: tether.EventTextDelta, MessageID: "m1", Delta: "half an ans"})
	mustAppend(t, e, rc, &tether.Event{Type: tether.EventMessageStarted, MessageID: "r1", Role: tether.RoleAssistant})
	queued := mustRun(t, e, "queued", engine.RunRequest{Agent: "demo"})
	// The process dies: no Close, no finish. A new engine on the same store.
	e.Close()
	st.Close()

	st2 := testutil.OpenStore(t, dir)
	e2 := newEngine(t, st2, engine.Options{NodeID: "n1"})
	snap, err := e2.Run(ctx, lc.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r := snap.Runs[0]; r.Status != tether.RunAborted || r.Error == nil || r.Error.Code != "server_restart" {
		t.Fatalf("local run after restart: %+v", r)
	}
	if m := snap.Messages[len(snap.Messages)-1]; m.Status != tether.MessageAborted || m.Parts[0].Text != "half an ans" {
		t.Fatalf("its message: %+v", m)
	}
	// The external worker's run carries on: its lease is still valid.
	if _, err := e2.Append(ctx, rc.Run.ID, rc.Lease.Token, []*tether.Event{finished(tether.RunDone)}); err != nil {
		t.Fatalf("remote worker after restart: %v", err)
	}
	// The pending run is claimable again.
	c, err := e2.Claim(ctx, engine.ClaimRequest{WorkerID: "inproc", Agents: []string{"demo"}, Local: true, Wait: time.Second})
	if err != nil || c == nil || c.Run.ID != queued.ID {
		t.Fatalf("pending run after restart: %+v %v", c, err)
	}
}

func TestCancel(t *testing.T) {
	st := testutil.OpenStore(t, "")
	clock := testutil.NewClock()
	e := newEngine(t, st, engine.Options{CancelGrace: 10 * time.Second, SweepInterval: 10 * time.Millisecond, Now: clock.Now})
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	pending := mustRun(t, e, "t1", engine.RunRequest{})
	mustRun(t, e, "t1", engine.RunRequest{Multitask: tether.MultitaskEnqueue})
	// Cancel a pending run (not started): it ends at once.
	r, err := e.CancelRun(ctx, pending.ID)
	if err != nil || r.Status != tether.RunCancelled {
		t.Fatalf("cancel pending: %+v %v", r, err)
	}
	c := mustClaim(t, e, "echo")
	mustAppend(t, e, c, &tether.Event{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant})
	r, err = e.CancelRun(ctx, c.Run.ID)
	if err != nil || r.Status != tether.RunRunning || r.CancelRequestedAt.IsZero() {
		t.Fatalf("cancel running: %+v %v", r, err)
	}
	// The worker ignores it; the grace runs out and the server ends it.
	clock.Advance(11 * time.Second)
	testutil.Eventually(t, 5*time.Second, "run cancelled by the grace", func() bool {
		snap, _ := e.Run(ctx, c.Run.ID)
		return snap.Runs[0].Status == tether.RunCancelled
	})
	// Late events of the worker are refused and not applied.
	_, err = e.Append(ctx, c.Run.ID, c.Lease.Token, []*tether.Event{{Type: tether.EventTextDelta, MessageID: "m1", Delta: "late"}})
	wantCode(t, err, tether.CodeConflict)
	snap, _ := e.Run(ctx, c.Run.ID)
	if m := snap.Messages[len(snap.Messages)-1]; m.Status != tether.MessageAborted || len(m.Parts) != 0 {
		t.Fatalf("message after cancel: %+v", m)
	}
	// Cancelling a finished run changes nothing.
	if r, err := e.CancelRun(ctx, c.Run.ID); err != nil || r.Status != tether.RunCancelled {
		t.Fatalf("cancel finished: %+v %v", r, err)
	}
	_, err = e.CancelRun(ctx, "run_unknown")
	wantCode(t, err, tether.CodeNotFound)
}

func TestInput(t *testing.T) {
	e, _ := setup(t)
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	mustRun(t, e, "t1", engine.RunRequest{})
	c := mustClaim(t, e, "echo")
	mustAppend(t, e, c, &tether.Event{Type: tether.EventRunWaiting, Request: &tether.Request{ID: "q1", Kind: "approval"}})
	snap, _ := e.Thread(ctx, "t1")
	if snap.Thread.Status != tether.ThreadWaiting {
		t.Fatalf("thread status %s, want waiting", snap.Thread.Status)
	}
	_, err := e.SubmitInput(ctx, c.Run.ID, "other", json.RawMessage(`true`))
	wantCode(t, err, tether.CodeConflict)
	r, err := e.SubmitInput(ctx, c.Run.ID, "q1", json.RawMessage(`{"ok":true}`))
	if err != nil || r.Status != tether.RunRunning {
		t.Fatalf("input: %+v %v", r, err)
	}
	_, err = e.SubmitInput(ctx, c.Run.ID, "q1", json.RawMessage(`true`))
	wantCode(t, err, tether.CodeConflict)
	snap, _ = e.Thread(ctx, "t1")
	if snap.Thread.Status != tether.ThreadBusy {
		t.Fatalf("thread status %s, want busy", snap.Thread.Status)
	}
}

func TestValidationLeavesLogUnchanged(t *testing.T) {
	e, st := setup(t)
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	mustRun(t, e, "t1", engine.RunRequest{})
	c := mustClaim(t, e, "echo")
	before := len(readAll(t, st, "t1"))
	cases := []struct {
		name string
		evs  []*tether.Event
		code tether.Code
	}{
		{"delta for unknown message", []*tether.Event{{Type: tether.EventTextDelta, MessageID: "nope", Delta: "x"}}, tether.CodeBadRequest},
		{"batch with a bad third event", append(answer("m1", "a", "b")[:2], &tether.Event{Type: tether.EventTextDelta, MessageID: "m9", Delta: "x"}), tether.CodeBadRequest},
		{"server-only type", []*tether.Event{{Type: tether.EventRunStarted, WorkerID: "x"}}, tether.CodeBadRequest},
		{"unknown type", []*tether.Event{{Type: "text.deltaa"}}, tether.CodeBadRequest},
		{"second message.started with the same id", []*tether.Event{
			{Type: tether.EventMessageStarted, MessageID: "dup", Role: tether.RoleAssistant},
			{Type: tether.EventMessageStarted, MessageID: "dup", Role: tether.RoleAssistant}}, tether.CodeConflict},
		{"offset set by the worker", []*tether.Event{{Type: tether.EventCustom, Name: "x", Offset: "0000000001_0000000000000001"}}, tether.CodeBadRequest},
		{"event for another run", []*tether.Event{{Type: tether.EventCustom, Name: "x", RunID: "run_other"}}, tether.CodeBadRequest},
		{"run.finished aborted by a worker", []*tether.Event{{Type: tether.EventRunFinished, Status: "aborted"}}, tether.CodeBadRequest},
		{"event too large", []*tether.Event{{Type: tether.EventCustom, Name: "big", Data: json.RawMessage(`"` + strings.Repeat("x", 2<<20) + `"`)}}, tether.CodeTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Append(ctx, c.Run.ID, c.Lease.Token, tc.evs)
			wantCode(t, err, tc.code)
			if n := len(readAll(t, st, "t1")); n != before {
				t.Fatalf("log has %d events, want %d", n, before)
			}
		})
	}
	// After all that, a valid append works.
	mustAppend(t, e, c, answer("ok", "fine")...)
}

// TestConcurrentAppendsCombine races many appenders on one run: every
// event is committed once, each appender's events stay in order, and the
// snapshot agrees with the log.
func TestConcurrentAppendsCombine(t *testing.T) {
	e, st := setup(t)
	mustThread(t, e, "t1")
	mustRun(t, e, "t1", engine.RunRequest{})
	c := mustClaim(t, e, "echo")
	const appenders, each = 16, 25
	var wg sync.WaitGroup
	for a := 0; a < appenders; a++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("m%d", a)
			if _, err := e.Append(context.Background(), c.Run.ID, c.Lease.Token, []*tether.Event{{Type: tether.EventMessageStarted, MessageID: id, Role: tether.RoleAssistant}}); err != nil {
				t.Error(err)
				return
			}
			for i := 0; i < each; i++ {
				if _, err := e.Append(context.Background(), c.Run.ID, c.Lease.Token, []*tether.Event{{Type: tether.EventTextDelta, MessageID: id, Delta: fmt.Sprintf("%d,", i)}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	log := readAll(t, st, "t1")
	got := map[string]string{}
	for _, ev := range log {
		if ev.Type == tether.EventTextDelta {
			got[ev.MessageID] += ev.Delta
		}
	}
	var want strings.Builder
	for i := 0; i < each; i++ {
		fmt.Fprintf(&want, "%d,", i)
	}
	snap, _ := e.Thread(ctxT(t), "t1")
	texts := map[string]string{}
	for _, m := range snap.Messages {
		if m.Role == tether.RoleAssistant {
			texts[m.ID] = m.Parts[0].Text
		}
	}
	for a := 0; a < appenders; a++ {
		id := fmt.Sprintf("m%d", a)
		if got[id] != want.String() || texts[id] != want.String() {
			t.Fatalf("%s: log %q, snapshot %q, want %q", id, got[id], texts[id], want.String())
		}
	}
	if c := e.Counters(); c.Batches.Load() >= c.Appends.Load() {
		t.Logf("no combining happened (%d batches for %d appends)", c.Batches.Load(), c.Appends.Load())
	}
}

// failingStore fails Commit while fail is set: a fault injected into the
// real store.
type failingStore struct {
	store.Store
	mu   sync.Mutex
	fail bool
}

func (f *failingStore) Commit(ctx context.Context, b *store.Batch) (*store.Result, error) {
	f.mu.Lock()
	fail := f.fail
	f.mu.Unlock()
	if fail && !b.Create {
		return nil, fmt.Errorf("disk on fire")
	}
	return f.Store.Commit(ctx, b)
}

func TestCommitFailureReloads(t *testing.T) {
	fs := &failingStore{Store: testutil.OpenStore(t, "")}
	e := newEngine(t, fs, engine.Options{})
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	mustRun(t, e, "t1", engine.RunRequest{})
	c := mustClaim(t, e, "echo")
	mustAppend(t, e, c, &tether.Event{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant})

	fs.mu.Lock()
	fs.fail = true
	fs.mu.Unlock()
	_, err := e.Append(ctx, c.Run.ID, c.Lease.Token, []*tether.Event{{Type: tether.EventTextDelta, MessageID: "m1", Delta: "lost"}})
	wantCode(t, err, tether.CodeUnavailable)
	if strings.Contains(err.Error(), "fire") && !strings.Contains(fmt.Sprint(err), "retry") {
		t.Fatalf("error leaks the cause: %v", err)
	}
	fs.mu.Lock()
	fs.fail = false
	fs.mu.Unlock()
	// The state was rebuilt from the store: the failed delta is not in
	// it, and the same append now works.
	mustAppend(t, e, c, &tether.Event{Type: tether.EventTextDelta, MessageID: "m1", Delta: "kept"})
	snap, _ := e.Thread(ctx, "t1")
	if txt := snap.Messages[0].Parts[0].Text; txt != "kept" {
		t.Fatalf("text %q, want %q", txt, "kept")
	}
}

func TestDeleteThread(t *testing.T) {
	e, _ := setup(t)
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	mustRun(t, e, "t1", engine.RunRequest{})
	c := mustClaim(t, e, "echo")
	sub, err := e.Subscribe(ctx, engine.SubscribeRequest{ThreadID: "t1", Cursor: tether.OffsetNow})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := e.DeleteThread(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Next(ctx); err == nil {
		t.Fatal("subscription survived the delete")
	}
	_, err = e.Thread(ctx, "t1")
	wantCode(t, err, tether.CodeNotFound)
	_, err = e.Append(ctx, c.Run.ID, c.Lease.Token, answer("m", "x"))
	wantCode(t, err, tether.CodeNotFound)
	// The id can be used again, from scratch.
	mustThread(t, e, "t1")
	snap, _ := e.Thread(ctx, "t1")
	if len(snap.Runs) != 0 || snap.Offset != tether.OffsetStart {
		t.Fatalf("recreated thread: %+v", snap)
	}
}

// TestForeignLogs checks that logs kept in the store under IDs the engine
// does not own (Durable Streams' "ds:…") are never loaded as threads, are
// not listed, and that their commits are published to the hub without
// disturbing the engine.
func TestForeignLogs(t *testing.T) {
	e, st := setup(t)
	ctx := ctxT(t)
	now := tether.Now()
	const id = "ds:some/stream"
	ev := &tether.Event{Type: "ds.data", TS: now, Data: json.RawMessage(`"aGk="`)}
	enc, err := ev.Encode()
	if err != nil {
		t.Fatal(err)
	}
	sub := e.Hub().Subscribe(id, tether.OffsetStart)
	defer sub.Close()
	if _, err := st.Commit(ctx, &store.Batch{ThreadID: id, Create: true, Events: []*tether.Event{ev}, Encoded: [][]byte{enc},
		Thread: &tether.Thread{ID: id, Status: tether.ThreadIdle, CreatedAt: now, UpdatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	recs, err := sub.Next(ctx)
	if err != nil || len(recs) != 1 || recs[0].Type != "ds.data" {
		t.Fatalf("hub: %v, %v", recs, err)
	}
	_, err = e.Thread(ctx, id)
	wantCode(t, err, tether.CodeNotFound)
	_, err = e.Subscribe(ctx, engine.SubscribeRequest{ThreadID: id})
	wantCode(t, err, tether.CodeNotFound)
	wantCode(t, e.DeleteThread(ctx, id), tether.CodeNotFound)
	_, _, err = e.CreateThread(ctx, id, nil)
	wantCode(t, err, tether.CodeBadRequest)
	mustThread(t, e, "t1")
	page, err := e.Threads(ctx, store.ThreadQuery{})
	if err != nil || len(page.Threads) != 1 || page.Threads[0].ID != "t1" {
		t.Fatalf("listing: %+v, %v", page, err)
	}
	if _, err := st.Thread(ctx, id); err != nil {
		t.Fatalf("the foreign log was touched: %v", err)
	}
}

// A run of an in-process agent with a cancel request pending when the
// server stops ends cancelled at the restart, not aborted: the client asked
// for the run to end and it did, as the cancel grace would have ended it.
func TestRestartEndsCancelledRunCancelled(t *testing.T) {
	dir := t.TempDir()
	st := testutil.OpenStore(t, dir)
	e := engine.New(st, engine.Options{NodeID: "n1"})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	mustThread(t, e, "local")
	mustRun(t, e, "local", engine.RunRequest{Agent: "demo"})
	lc, err := e.Claim(ctx, engine.ClaimRequest{WorkerID: "inproc", Agents: []string{"demo"}, Local: true, Wait: time.Second})
	if err != nil || lc == nil {
		t.Fatal(err)
	}
	mustAppend(t, e, lc, &tether.Event{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant},
		&tether.Event{Type: tether.EventTextDelta, MessageID: "m1", Delta: "half an ans"})
	if _, err := e.CancelRun(ctx, lc.Run.ID); err != nil {
		t.Fatal(err)
	}
	e.Close() // the process dies before the agent confirms the cancel
	st.Close()

	st2 := testutil.OpenStore(t, dir)
	e2 := newEngine(t, st2, engine.Options{NodeID: "n1"})
	snap, err := e2.Run(ctx, lc.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r := snap.Runs[0]; r.Status != tether.RunCancelled || r.Error != nil {
		t.Fatalf("a cancelled local run after restart: %s %+v", r.Status, r.Error)
	}
	if m := snap.Messages[len(snap.Messages)-1]; m.Status != tether.MessageAborted {
		t.Fatalf("its message: %+v", m)
	}
}
