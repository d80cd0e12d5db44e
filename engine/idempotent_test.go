package engine_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// A retry of a run creation (same Idempotency-Key) that arrives while the
// first try's commit is still in flight waits for that commit: it never
// hands out a run ID that does not exist yet, or never will. If the first
// commit fails, the retry creates the run; either way the log holds one
// run.created, and the run the client was given is readable. In a
// synctest bubble, so that the test knows the retry is waiting rather
// than give it 100ms to answer wrongly.
func TestIdempotentCreateWhileCommitInFlight(t *testing.T) {
	for _, tc := range []struct {
		name     string
		commitOK bool
	}{{"first commit lands", true}, {"first commit fails", false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := &gatedStore{Store: testutil.OpenStore(t, ""), held: make(chan struct{}, 4), release: make(chan bool, 4)}
				e := newEngine(t, g, engine.Options{})
				t.Cleanup(func() { close(g.release) })
				ctx := ctxT(t)
				mustThread(t, e, "t1")
				req := engine.RunRequest{Agent: "echo", IdempotencyKey: "k1", Input: userInput("hi")}

				g.mu.Lock()
				g.gated = true
				g.mu.Unlock()
				// The first try gives up while its commit is held.
				tctx, cancel := context.WithCancel(ctx)
				tried := make(chan error, 1)
				go func() { _, err := e.CreateRun(tctx, "t1", req); tried <- err }()
				<-g.held
				cancel()
				if err := <-tried; !errors.Is(err, context.Canceled) {
					t.Fatalf("first try: %v, want it to give up", err)
				}
				// Its retry comes while the commit is still held.
				type answer struct {
					rc  *engine.RunCreated
					err error
				}
				retried := make(chan answer, 1)
				go func() {
					rc, err := e.CreateRun(ctx, "t1", req)
					retried <- answer{rc, err}
				}()
				synctest.Wait() // the retry waits, or has answered
				if len(retried) != 0 {
					a := <-retried
					t.Fatalf("the retry answered (%+v, %v) before the first try's commit had an outcome", a.rc, a.err)
				}
				g.mu.Lock()
				g.gated = false
				g.mu.Unlock()
				g.release <- tc.commitOK
				a := <-retried
				if a.err != nil {
					// An error is honest (the client retries again); a run ID
					// that does not exist is not.
					wantCode(t, a.err, tether.CodeUnavailable)
					a.rc, a.err = e.CreateRun(ctx, "t1", req)
					if a.err != nil {
						t.Fatal(a.err)
					}
				}
				if tc.commitOK && a.rc.Created {
					t.Fatalf("the retry created a second run")
				}
				if _, err := e.Run(ctx, a.rc.Run.ID); err != nil {
					t.Fatalf("the run the retry answered with: %v", err)
				}
				var created []string
				for _, ev := range readAll(t, g, "t1") {
					if ev.Type == tether.EventRunCreated {
						created = append(created, ev.RunID)
					}
				}
				if len(created) != 1 || created[0] != a.rc.Run.ID {
					t.Fatalf("runs created in the log: %v, want just %s", created, a.rc.Run.ID)
				}
			})
		})
	}
}

// RunByKey finds the run a key created, and creates none: an unknown key,
// or a thread that does not exist, is not_found.
func TestRunByKey(t *testing.T) {
	e, _ := setup(t)
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	run := mustRun(t, e, "t1", engine.RunRequest{Agent: "echo", IdempotencyKey: "k1", Input: userInput("hi")})
	got, err := e.RunByKey(ctx, "t1", "k1")
	if err != nil || got.ID != run.ID {
		t.Fatalf("RunByKey(k1) = %s, %v; want %s", got.ID, err, run.ID)
	}
	_, err = e.RunByKey(ctx, "t1", "k2")
	wantCode(t, err, tether.CodeNotFound)
	_, err = e.RunByKey(ctx, "nope", "k1")
	wantCode(t, err, tether.CodeNotFound)
	snap, err := e.Thread(ctx, "t1")
	if err != nil || len(snap.Runs) != 1 {
		t.Fatalf("after the lookups the thread has %d runs (%v), want 1", len(snap.Runs), err)
	}
}
