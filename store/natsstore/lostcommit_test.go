package natsstore_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/natsstore"
	"github.com/tetherhq/tether/store/natsstore/natstest"
)

// lostCommitStore makes the next commit that creates a thread or holds an
// event of a type land as a commit whose ack was lost does: the message is
// published and delivered, but no row is written (the committer stops
// right after its publish) and the commit fails with ErrUnavailable, the
// engine's 503.
type lostCommitStore struct {
	*natsstore.Store
	lose atomic.Pointer[string]
}

func (s *lostCommitStore) Commit(ctx context.Context, b *store.Batch) (*store.Result, error) {
	typ := s.lose.Load()
	if typ == nil || !(*typ == "create" && b.Create || slices.ContainsFunc(b.Events, func(e *tether.Event) bool { return e.Type == *typ })) {
		return s.Store.Commit(ctx, b)
	}
	s.lose.Store(nil)
	natsstore.DieAfterPublish(s.Store, true)
	defer natsstore.DieAfterPublish(s.Store, false)
	if _, err := s.Store.Commit(ctx, b); err != nil {
		return nil, err
	}
	return nil, store.ErrUnavailable
}

func (s *lostCommitStore) loseNext(typ string) { s.lose.Store(&typ) }

// Every write a client retries after a 503 whose commit landed on
// JetStream (published, its rows not written) acts once: the engine drops
// the thread, loads it again from the log (the rows behind it), and the
// retry finds what the first try did. A thread created again with its id
// and metadata is that thread; a run with its Idempotency-Key is that run;
// a worker's append with its producer sequence is a duplicate; the same
// answer to the same request is that answer. One event of each in the log.
func TestRetryAfterLostCommit(t *testing.T) {
	opts := optionsFor(natstest.StartServer(t).ClientURL(), t.TempDir(), 1)
	opts.RepairDelay = time.Hour // the rows stay behind the log
	ns := node(t, opts, "a")
	st := &lostCommitStore{Store: ns}
	e := engine.New(st, engine.Options{NodeID: "a", AcceptAgent: func(string) bool { return true }})
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	unavailable := func(what string, err error) {
		t.Helper()
		if tether.CodeOf(err) != tether.CodeUnavailable {
			t.Fatalf("%s whose commit was lost: %v, want unavailable", what, err)
		}
	}

	meta := json.RawMessage(`{"k":1}`)
	st.loseNext("create")
	_, _, err := e.CreateThread(ctx, "t1", meta)
	unavailable("create thread", err)
	if th, created, err := e.CreateThread(ctx, "t1", meta); err != nil || created || th.ID != "t1" {
		t.Fatalf("create again: %+v %v %v", th, created, err)
	}

	req := engine.RunRequest{Agent: "ext", IdempotencyKey: "k1",
		Input: tether.RunInput{Messages: []tether.InputMessage{{Role: tether.RoleUser, Content: "hi"}}}}
	st.loseNext(tether.EventRunCreated)
	_, err = e.CreateRun(ctx, "t1", req)
	unavailable("create run", err)
	rc, err := e.CreateRun(ctx, "t1", req)
	if err != nil || rc.Created {
		t.Fatalf("create run again: %+v %v", rc, err)
	}

	c, err := e.Claim(ctx, engine.ClaimRequest{WorkerID: "w1", Agents: []string{"ext"}, Wait: 5 * time.Second})
	if err != nil || c == nil || c.Run.ID != rc.Run.ID {
		t.Fatalf("claim: %+v %v", c, err)
	}
	h, p := engine.Holder{Token: c.Lease.Token}, &engine.Producer{ID: "w1", Epoch: 0, Seq: 0}
	ask := []*tether.Event{{Type: tether.EventRunWaiting, Request: &tether.Request{ID: "q1", Kind: "input"}}}
	st.loseNext(tether.EventRunWaiting)
	_, err = e.ProducerAppend(ctx, c.Run.ID, h, p, ask)
	unavailable("append", err)
	if res, err := e.ProducerAppend(ctx, c.Run.ID, h, p, ask); err != nil || !res.Duplicate {
		t.Fatalf("append again: %+v %v, want a duplicate", res, err)
	}

	st.loseNext(tether.EventRunInput)
	_, err = e.SubmitInput(ctx, c.Run.ID, "q1", json.RawMessage(`"yes"`))
	unavailable("answer", err)
	if r, err := e.SubmitInput(ctx, c.Run.ID, "q1", json.RawMessage(`"yes"`)); err != nil || r.Status != tether.RunRunning {
		t.Fatalf("answer again: %+v %v", r, err)
	}

	recs, err := ns.ReadEvents(ctx, "t1", tether.OffsetStart, 100)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range recs {
		ev, err := r.Decode()
		if err != nil {
			t.Fatal(err)
		}
		count[ev.Type]++
	}
	for _, typ := range []string{tether.EventRunCreated, tether.EventRunWaiting, tether.EventRunInput} {
		if count[typ] != 1 {
			t.Errorf("%d %s events, want 1 (log: %v)", count[typ], typ, count)
		}
	}
}
