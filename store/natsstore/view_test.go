package natsstore_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/natsstore"
	"github.com/tetherhq/tether/store/natsstore/natstest"
)

// TestReadRacingDelete: a node reads a thread's last message, then another
// node deletes the thread (its log purged) before the first reads the log
// up to that message. The read answers from the log as it is now (the
// thread is gone), not with an error about the log having changed under
// it: a read racing a delete is a normal thing, not a store failure.
func TestReadRacingDelete(t *testing.T) {
	opts := optionsFor(natstest.StartServer(t).ClientURL(), t.TempDir(), 1)
	a := openStore(t, opts)
	defer a.Close()
	b := openStore(t, opts)
	defer b.Close()
	res := mustCommit(t, a, createBatch(t, "t", 2))
	mustCommit(t, a, appendBatch(t, "t", res.Version, 2, "more"))

	var once sync.Once
	natsstore.AfterLast(b, func(id string) {
		once.Do(func() {
			if err := a.DeleteThread(ctx, id); err != nil {
				t.Errorf("delete: %v", err)
			}
		})
	})
	defer natsstore.AfterLast(b, nil)
	if _, err := b.Thread(ctx, "t"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("thread read while deleted: %v, want ErrNotFound", err)
	}
}
