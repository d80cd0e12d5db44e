package natsstore_test

import (
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/natsstore"
)

// TestLeaseCheckAcrossNodes: node b renews a run's lease (a run row, no
// event) on a thread node a has cached; a then commits a batch that names
// the lease before the renewal (store.Batch.Leases): it conflicts, also
// when b died before writing the renewal's rows (only the log has it).
// Naming the renewed lease, it goes.
func TestLeaseCheckAcrossNodes(t *testing.T) {
	eachDeployment(t, func(t *testing.T, opts natsstore.Options) {
		a, b := node(t, opts, "a"), node(t, opts, "b")
		for _, rowsLost := range []bool{false, true} {
			id := "t-written"
			if rowsLost {
				id = "t-rows-lost"
			}
			l1 := store.Lease{Token: "tok", Owner: "w", ExpiresAt: time.Now().Add(time.Second)}
			l2 := l1
			l2.ExpiresAt = l1.ExpiresAt.Add(10 * time.Second)
			row := func(status tether.RunStatus, l store.Lease) []*store.RunRecord {
				return []*store.RunRecord{{Run: tether.Run{ID: id + "-r1", ThreadID: id, Status: status}, Lease: l}}
			}
			held := func(l store.Lease) []store.LeaseCheck {
				return []store.LeaseCheck{{RunID: id + "-r1", Token: l.Token, ExpiresAt: l.ExpiresAt}}
			}
			c := createBatch(t, id, 1)
			c.Runs = row(tether.RunRunning, l1)
			res := mustCommit(t, a, c)
			mustCommit(t, a, &store.Batch{ThreadID: id, Version: res.Version, Runs: row(tether.RunRunning, l1)}) // a caches the thread

			natsstore.DieAfterPublish(b, rowsLost)
			mustCommit(t, b, &store.Batch{ThreadID: id, Version: res.Version, Runs: row(tether.RunRunning, l2), Leases: held(l1)})
			natsstore.DieAfterPublish(b, false)

			end := appendBatch(t, id, res.Version, 1, "end")
			end.Runs, end.Leases = row(tether.RunAborted, store.Lease{}), held(l1)
			if _, err := a.Commit(ctx, end); err != store.ErrConflict {
				t.Fatalf("rows lost %v: a batch on the lease before the renewal: %v, want a conflict", rowsLost, err)
			}
			end = appendBatch(t, id, res.Version, 1, "end")
			end.Runs, end.Leases = row(tether.RunAborted, store.Lease{}), held(l2)
			mustCommit(t, a, end)
		}
	})
}
