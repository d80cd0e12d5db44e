package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// A claim whose caller is gone by the time its run.started is committed
// (the worker disconnected) never delivers its lease: the run must not sit
// under a lease nobody holds until it expires and then end aborted without
// ever being worked on. It goes to the next claim at once.
func TestClaimAbandonedMidCommit(t *testing.T) {
	g := &gatedStore{Store: testutil.OpenStore(t, ""), held: make(chan struct{}, 4), release: make(chan bool, 4)}
	e := newEngine(t, g, engine.Options{LeaseTTL: time.Hour})
	t.Cleanup(func() { close(g.release) })
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	run := mustRun(t, e, "t1", engine.RunRequest{})

	g.mu.Lock()
	g.gated = true
	g.mu.Unlock()
	cctx, cancel := context.WithCancel(ctx)
	type claimed struct {
		c   *engine.Claim
		err error
	}
	first := make(chan claimed, 1)
	go func() {
		c, err := e.Claim(cctx, engine.ClaimRequest{WorkerID: "w1", Agents: []string{"echo"}, Wait: 5 * time.Second})
		first <- claimed{c, err}
	}()
	<-g.held // run.started is being committed
	cancel() // and the worker goes away
	g.mu.Lock()
	g.gated = false
	g.mu.Unlock()
	g.release <- true
	if a := <-first; a.c != nil || !errors.Is(a.err, context.Canceled) {
		t.Fatalf("abandoned claim: %+v, %v; want context.Canceled", a.c, a.err)
	}

	c, err := e.Claim(ctx, engine.ClaimRequest{WorkerID: "w2", Agents: []string{"echo"}, Wait: 5 * time.Second})
	if err != nil || c == nil {
		t.Fatalf("the next claim: %+v, %v; want the abandoned run", c, err)
	}
	if c.Run.ID != run.ID || c.Run.Attempt != 2 || c.Run.WorkerID != "w2" {
		t.Fatalf("next claim got run %s attempt %d worker %s; want %s attempt 2 worker w2", c.Run.ID, c.Run.Attempt, c.Run.WorkerID, run.ID)
	}
	mustAppend(t, e, c, append(answer("m1", "hi"), finished(tether.RunDone))...)
	var got []string
	for _, ev := range readAll(t, g, "t1") {
		switch ev.Type {
		case tether.EventRunStarted:
			got = append(got, ev.Type+" "+ev.WorkerID)
		case tether.EventRunFinished:
			got = append(got, ev.Type+" "+ev.Status)
		}
	}
	if want := "run.started w1,run.started w2,run.finished done"; strings.Join(got, ",") != want {
		t.Fatalf("the run's life: %s, want %s", strings.Join(got, ","), want)
	}
}

// A claim that fails on the store (the disk, the NATS server) must leave
// its run claimable: the run had been taken from the queue of ready runs,
// and without it no later claim would find it until a restart.
func TestClaimFailureKeepsTheRunQueued(t *testing.T) {
	fs := &failingStore{Store: testutil.OpenStore(t, "")}
	e := newEngine(t, fs, engine.Options{})
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	run := mustRun(t, e, "t1", engine.RunRequest{})

	fs.mu.Lock()
	fs.fail = true
	fs.mu.Unlock()
	_, err := e.Claim(ctx, engine.ClaimRequest{WorkerID: "w1", Agents: []string{"echo"}, Wait: time.Second})
	wantCode(t, err, tether.CodeUnavailable)
	fs.mu.Lock()
	fs.fail = false
	fs.mu.Unlock()

	c, err := e.Claim(ctx, engine.ClaimRequest{WorkerID: "w1", Agents: []string{"echo"}, Wait: 2 * time.Second})
	if err != nil || c == nil || c.Run.ID != run.ID {
		t.Fatalf("claim after the store recovered: %+v, %v; want run %s", c, err, run.ID)
	}
}
