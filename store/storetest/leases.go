package storetest

import (
	"fmt"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// testLeaseChecks: a batch with Leases is committed only if each run's
// stored lease is the one it names, as of just before the batch. A renewal
// (a run row, no event) leaves the version alone, so only this tells a
// batch that acted on the old lease from one that may go.
func testLeaseChecks(t *testing.T, s *suite) {
	st := s.fresh(t)
	first := time.Date(2030, 1, 1, 0, 0, 10, 123456789, time.UTC)
	held := func(l store.Lease) store.LeaseCheck {
		return store.LeaseCheck{RunID: "r1", Token: l.Token, ExpiresAt: l.ExpiresAt}
	}
	withLease := func(status tether.RunStatus, l store.Lease) *store.RunRecord {
		r := newRun("r1", "t", status, "")
		r.Lease = l
		return r
	}
	l1 := store.Lease{Token: "tok", Owner: "w", ExpiresAt: first}
	l2 := l1
	l2.ExpiresAt = first.Add(9 * time.Second)

	// Before the thread's first batch, r1 has no row: the zero lease.
	b := createBatch(t, "t", 1)
	b.Runs = []*store.RunRecord{withLease(tether.RunRunning, l1)}
	b.Leases = []store.LeaseCheck{held(l2)}
	_, err := st.Commit(ctx, b)
	wantErr(t, "create checking a lease of a run without row", err, store.ErrConflict)
	if _, err := st.Thread(ctx, "t"); err == nil {
		t.Fatal("a create whose lease check failed created the thread")
	}
	b = createBatch(t, "t", 1)
	b.Runs = []*store.RunRecord{withLease(tether.RunRunning, l1)}
	b.Leases = []store.LeaseCheck{{RunID: "r1"}}
	commit(t, st, b)

	// Renewed: a row, no event.
	commit(t, st, &store.Batch{ThreadID: "t", Version: 1, Runs: []*store.RunRecord{withLease(tether.RunRunning, l2)},
		Leases: []store.LeaseCheck{held(l1)}})

	// Acting on the old lease fails, and writes nothing.
	ab := appendBatch(t, "t", 1, 1, "on l1")
	ab.Runs = []*store.RunRecord{withLease(tether.RunAborted, store.Lease{})}
	ab.Leases = []store.LeaseCheck{held(l1)}
	_, err = st.Commit(ctx, ab)
	wantErr(t, "a batch checking the lease before the renewal", err, store.ErrConflict)
	if v := threadOf(t, st, "t").Version; v != 1 {
		t.Fatalf("version %d after a batch whose lease check failed, want 1", v)
	}
	if n := len(readAll(t, st, "t")); n != 1 {
		t.Fatalf("%d events after a batch whose lease check failed, want 1", n)
	}
	if got, err := st.Run(ctx, "r1"); err != nil || got.Run.Status != tether.RunRunning || !held(l2).Holds(got.Lease) {
		t.Fatalf("run after a batch whose lease check failed: %+v, %v", got, err)
	}
	for _, c := range []store.LeaseCheck{
		{RunID: "r1", Token: "other", ExpiresAt: l2.ExpiresAt},
		{RunID: "r1", Token: l2.Token, ExpiresAt: l2.ExpiresAt.Add(time.Nanosecond)},
		{RunID: "r1"},
		{RunID: "nope", Token: "tok"},
	} {
		ab := appendBatch(t, "t", 1, 1, "wrong")
		ab.Leases = []store.LeaseCheck{held(l2), c}
		_, err := st.Commit(ctx, ab)
		wantErr(t, fmt.Sprintf("check %+v", c), err, store.ErrConflict)
	}

	// On the current lease (and a run without row, the zero lease) it goes.
	ab = appendBatch(t, "t", 1, 1, "on l2")
	ab.Runs = []*store.RunRecord{withLease(tether.RunAborted, store.Lease{})}
	ab.Leases = []store.LeaseCheck{held(l2), {RunID: "nope"}}
	commit(t, st, ab)
	if got, err := st.Run(ctx, "r1"); err != nil || got.Run.Status != tether.RunAborted {
		t.Fatalf("run after the batch: %+v, %v", got, err)
	}
}
