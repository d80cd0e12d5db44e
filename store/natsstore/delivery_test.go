package natsstore_test

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/natsstore"
	"github.com/tetherhq/tether/store/natsstore/natstest"
)

// TestCommitWaitsForDelivery: the node's notify consumer is held while a
// batch commits, past the store's Timeout. Commit does not return success
// before the batch is passed to the notify function (store.Store's
// contract: a 2xx is durable and visible); once the consumer goes on, it
// returns, the batch notified.
func TestCommitWaitsForDelivery(t *testing.T) {
	var logs testutil.SyncBuffer
	opts := optionsFor(natstest.StartServer(t).ClientURL(), t.TempDir(), 1)
	opts.Timeout = time.Second
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	st := openStore(t, opts)
	defer st.Close()
	var rec recorder
	st.SetNotify(rec.notify)
	res := mustCommit(t, st, createBatch(t, "t", 1))

	release := sync.OnceFunc(natsstore.HoldDelivery(st))
	defer release()
	type result struct {
		err      error
		notified int // records notified when Commit returned
	}
	done := make(chan result, 1)
	go func() {
		_, err := st.Commit(ctx, appendBatch(t, "t", res.Version, 2, "held"))
		done <- result{err, rec.records()}
	}()
	// Hold the delivery until the store says it waited past its Timeout,
	// or Commit returns.
	var r *result
	for r == nil && !strings.Contains(logs.String(), "not delivered") {
		select {
		case got := <-done:
			r = &got
		case <-time.After(20 * time.Millisecond):
		}
	}
	release()
	if r == nil {
		got := <-done
		r = &got
	}
	switch {
	case r.err == nil && r.notified != 3:
		t.Fatalf("Commit returned success with %d of 3 records notified:\n%s", r.notified, logs.String())
	case r.err != nil && !errors.Is(r.err, store.ErrUnavailable):
		t.Fatalf("Commit: %v", r.err)
	}
	testutil.Eventually(t, 10*time.Second, "the held batch notified", func() bool { return rec.records() == 3 })
}

// TestCloseWhileDeliveryHeld: a Commit waits for its batch's delivery,
// which is held; Close does not wait for it for ever: the Commit gives up
// with ErrUnavailable a Timeout after Close started.
func TestCloseWhileDeliveryHeld(t *testing.T) {
	var logs testutil.SyncBuffer
	opts := optionsFor(natstest.StartServer(t).ClientURL(), t.TempDir(), 1)
	opts.Timeout = time.Second
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	st := openStore(t, opts)
	res := mustCommit(t, st, createBatch(t, "t", 1))

	release, done := commitHeld(t, st, res.Version)
	defer release()
	testutil.Eventually(t, 10*time.Second, "the commit waiting", func() bool { return strings.Contains(logs.String(), "not delivered") })
	closed := make(chan error, 1)
	go func() { closed <- st.Close() }()
	if err := <-done; !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Commit while the store closed: %v, want ErrUnavailable", err)
	}
	release() // the consumer stops once it can
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// TestDeliveryFigures: a commit whose delivery is held counts as awaiting,
// and as late once it waited past the store's Timeout; once delivered it
// no longer awaits, and the late count stays.
func TestDeliveryFigures(t *testing.T) {
	opts := optionsFor(natstest.StartServer(t).ClientURL(), t.TempDir(), 1)
	opts.Timeout = 300 * time.Millisecond
	st := openStore(t, opts)
	defer st.Close()
	var d store.Delivery = st
	res := mustCommit(t, st, createBatch(t, "t", 1))
	if n, l := d.AwaitingDelivery(), d.LateDeliveries(); n != 0 || l != 0 {
		t.Fatalf("after a delivered commit: %d awaiting, %d late; want 0, 0", n, l)
	}

	release, done := commitHeld(t, st, res.Version)
	defer release()
	testutil.Eventually(t, 10*time.Second, "the commit awaiting delivery", func() bool { return d.AwaitingDelivery() == 1 })
	testutil.Eventually(t, 10*time.Second, "the commit counted late", func() bool { return d.LateDeliveries() == 1 })
	release()
	if err := <-done; err != nil {
		t.Fatalf("Commit once delivered: %v", err)
	}
	if n, l := d.AwaitingDelivery(), d.LateDeliveries(); n != 0 || l != 1 {
		t.Fatalf("after the held commit: %d awaiting, %d late; want 0, 1", n, l)
	}
}

// commitHeld holds st's delivery and commits a batch to thread "t" (at
// version) meanwhile. The commit's error comes on done; release lets the
// delivery go on (once, however often it is called).
func commitHeld(t *testing.T, st *natsstore.Store, version int64) (release func(), done <-chan error) {
	release = sync.OnceFunc(natsstore.HoldDelivery(st))
	ch := make(chan error, 1)
	go func() {
		_, err := st.Commit(ctx, appendBatch(t, "t", version, 2, "held"))
		ch <- err
	}()
	return release, ch
}
