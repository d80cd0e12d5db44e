package engine_test

import (
	"errors"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

func TestProducerRules(t *testing.T) {
	dir := t.TempDir()
	st := testutil.OpenStore(t, dir)
	e := newEngine(t, st, engine.Options{})
	ctx := ctxT(t)
	mustThread(t, e, "t1")
	mustRun(t, e, "t1", engine.RunRequest{})
	c := mustClaim(t, e, "echo")
	send := func(epoch, seq int64, evs ...*tether.Event) (*engine.AppendResult, error) {
		return e.ProducerAppend(ctx, c.Run.ID, c.Lease.Token, &engine.Producer{ID: "w1", Epoch: epoch, Seq: seq}, evs)
	}
	custom := func(name string) *tether.Event { return &tether.Event{Type: tether.EventCustom, Name: name} }
	logLen := func() int { return len(readAll(t, st, "t1")) }

	// A new producer starts at 0.
	_, err := send(0, 3, custom("a"))
	var pe *engine.ProducerError
	if !errors.As(err, &pe) || pe.Err.Code != tether.CodeConflict || pe.ExpectedSeq != 0 || pe.ReceivedSeq != 3 {
		t.Fatalf("first append with seq 3: %v", err)
	}
	res, err := send(0, 0, custom("a"))
	if err != nil || res.Duplicate || res.Producer.Seq != 0 {
		t.Fatalf("seq 0: %+v %v", res, err)
	}
	n := logLen()
	// A retry is a duplicate: nothing appended, even though its events
	// would now be invalid.
	res, err = send(0, 0, &tether.Event{Type: tether.EventMessageStarted, MessageID: "x", Role: tether.RoleAssistant})
	if err != nil || !res.Duplicate || logLen() != n {
		t.Fatalf("duplicate: %+v %v (log %d → %d)", res, err, n, logLen())
	}
	if _, err := send(0, 1, custom("b")); err != nil {
		t.Fatal(err)
	}
	_, err = send(0, 5, custom("c"))
	if !errors.As(err, &pe) || pe.ExpectedSeq != 2 || pe.ReceivedSeq != 5 {
		t.Fatalf("gap: %v", err)
	}
	// A new epoch must start at 0, then fences the old one.
	_, err = send(1, 4, custom("d"))
	wantCode(t, err, tether.CodeBadRequest)
	if _, err := send(1, 0, custom("d")); err != nil {
		t.Fatal(err)
	}
	_, err = send(0, 2, custom("zombie"))
	if !errors.As(err, &pe) || pe.Err.Code != tether.CodeForbidden || pe.Epoch != 1 {
		t.Fatalf("stale epoch: %v", err)
	}
	// A rejected append does not use up its sequence number.
	_, err = send(1, 1, &tether.Event{Type: tether.EventTextDelta, MessageID: "nope", Delta: "x"})
	wantCode(t, err, tether.CodeBadRequest)
	if _, err := send(1, 1, custom("e"), finished(tether.RunDone)); err != nil {
		t.Fatal(err)
	}
	// The final append's retry after the run finished is still a
	// duplicate, not a conflict: its events are in the log.
	n = logLen()
	if res, err := send(1, 1, custom("e"), finished(tether.RunDone)); err != nil || !res.Duplicate || logLen() != n {
		t.Fatalf("retry of the last append: %+v %v", res, err)
	}

	// The producer's state is durable: a new engine on the same store
	// (after a crash) still knows it.
	e.Close()
	st.Close()
	st2 := testutil.OpenStore(t, dir)
	e2 := newEngine(t, st2, engine.Options{})
	res, err = e2.ProducerAppend(ctx, c.Run.ID, c.Lease.Token, &engine.Producer{ID: "w1", Epoch: 1, Seq: 1}, []*tether.Event{custom("e")})
	if err != nil || !res.Duplicate {
		t.Fatalf("duplicate after restart: %+v %v", res, err)
	}
	_, err = e2.ProducerAppend(ctx, c.Run.ID, c.Lease.Token, &engine.Producer{ID: "w1", Epoch: 1, Seq: 2}, []*tether.Event{custom("f")})
	wantCode(t, err, tether.CodeConflict) // the run is finished
	_, err = e2.ProducerAppend(ctx, c.Run.ID, c.Lease.Token, &engine.Producer{ID: "", Epoch: 0, Seq: 0}, []*tether.Event{custom("f")})
	wantCode(t, err, tether.CodeBadRequest)
}
