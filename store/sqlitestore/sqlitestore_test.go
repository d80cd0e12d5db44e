package sqlitestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/sqlitestore"
	"github.com/tetherhq/tether/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func open(tb testing.TB, path string, opts sqlitestore.Options) *sqlitestore.Store {
	tb.Helper()
	s, err := sqlitestore.Open(path, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(t testing.TB, dir string) store.Store {
			s, err := sqlitestore.Open(filepath.Join(dir, "tether.db"), sqlitestore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	})
}

// TestConformanceFsync runs the suite with every commit synced and tiny
// group commits, so that batches of one Commit call span transactions.
func TestConformanceFsync(t *testing.T) {
	if testing.Short() {
		t.Skip("the suite already ran without Fsync")
	}
	storetest.Run(t, storetest.Harness{
		Open: func(t testing.TB, dir string) store.Store {
			s, err := sqlitestore.Open(filepath.Join(dir, "tether.db"), sqlitestore.Options{Fsync: true, MaxBatchEvents: 3})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	})
}

func TestOpenCreatesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "tether.db")
	s := open(t, path, sqlitestore.Options{})
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Close checkpoints the WAL: the file alone holds everything.
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
		t.Fatalf("WAL holds %d bytes after Close", fi.Size())
	}
}

// TestOpenTwice checks the lock that keeps a second writer out.
func TestOpenTwice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tether.db")
	s := open(t, path, sqlitestore.Options{})
	if s2, err := sqlitestore.Open(path, sqlitestore.Options{}); err == nil {
		s2.Close()
		t.Fatal("opened a store that is open")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	open(t, path, sqlitestore.Options{}).Close()
}

func TestOpenOddPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "we?ird #dir%20", "tether.db")
	s := open(t, path, sqlitestore.Options{})
	commitOne(t, s, "t", true, 0)
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}

func TestOpenNotADatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tether.db")
	if err := os.WriteFile(path, []byte("this is not a SQLite file, not at all, no, not even close"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := sqlitestore.Open(path, sqlitestore.Options{}); err == nil {
		s.Close()
		t.Fatal("opened a file that is not a database")
	}
}

func TestEpoch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tether.db")
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	var slept time.Duration
	defer sqlitestore.SetSleep(func(d time.Duration) { slept += d; clock.Advance(d) })()
	opts := sqlitestore.Options{Now: clock.Now}

	s := open(t, path, opts)
	if s.Epoch() != 1_700_000_000 || slept != 0 {
		t.Fatalf("epoch %d after waiting %s, want the clock's seconds at once", s.Epoch(), slept)
	}
	res := commitOne(t, s, "t", true, 0)
	if e, _, _ := tether.ParseOffset(res.Records[0].Offset); e != s.Epoch() {
		t.Fatalf("offset %s is not of epoch %d", res.Records[0].Offset, s.Epoch())
	}
	s.Close()

	// Same second: the epoch still grows, but never ahead of the clock:
	// the open waits for the next second.
	clock.Advance(300 * time.Millisecond)
	for _, want := range []uint64{1_700_000_001, 1_700_000_002} {
		slept = 0
		s = open(t, path, opts)
		if s.Epoch() != want || slept <= 0 || slept > time.Second {
			t.Fatalf("epoch %d after waiting %s, want %d after under a second", s.Epoch(), slept, want)
		}
		s.Close()
	}
	// A clock gone back further than the open waits for: the epoch grows
	// by one.
	clock.Advance(-time.Hour)
	slept = 0
	s = open(t, path, opts)
	if s.Epoch() != 1_700_000_003 || slept != 0 {
		t.Fatalf("epoch %d after the clock went back (waited %s), want 1700000003 at once", s.Epoch(), slept)
	}
	s.Close()
	// Clock ahead: the epoch jumps to it.
	clock.now = time.Unix(1_800_000_000, 0)
	s = open(t, path, opts)
	if s.Epoch() != 1_800_000_000 {
		t.Fatalf("epoch %d, want 1800000000", s.Epoch())
	}
	res2 := commitOne(t, s, "t", false, 1)
	if !res2.Records[0].Offset.After(res.Records[0].Offset) {
		t.Fatalf("offset %s is not after %s", res2.Records[0].Offset, res.Records[0].Offset)
	}
}

// TestEventIDsNotReused deletes the newest events and checks that their
// sequence numbers stay used across a reopen.
func TestEventIDsNotReused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tether.db")
	s := open(t, path, sqlitestore.Options{})
	commitOne(t, s, "keep", true, 0)
	res := commitOne(t, s, "gone", true, 0)
	_, seq, _ := tether.ParseOffset(res.Records[0].Offset)
	if err := s.DeleteThread(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, path, sqlitestore.Options{})
	res = commitOne(t, s, "keep", false, 1)
	if _, seq2, _ := tether.ParseOffset(res.Records[0].Offset); seq2 <= seq {
		t.Fatalf("sequence %d reused (deleted event had %d)", seq2, seq)
	}
}

func TestFsyncOption(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tether.db")
	s := open(t, path, sqlitestore.Options{Fsync: true})
	commitOne(t, s, "t", true, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, sqlitestore.Options{})
	if tr, err := s.Thread(context.Background(), "t"); err != nil || tr.Version != 1 {
		t.Fatalf("thread after reopen: %+v, %v", tr, err)
	}
}

// TestCommitValidation checks that malformed batches fail before they
// reach the writer.
func TestCommitValidation(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "tether.db"), sqlitestore.Options{})
	ev := &tether.Event{Type: tether.EventCustom, TS: tether.Now()}
	enc, _ := ev.Encode()
	bad := map[string]*store.Batch{
		"nil":              nil,
		"no thread":        {Events: []*tether.Event{ev}, Encoded: [][]byte{enc}},
		"create, no row":   {ThreadID: "t", Create: true},
		"missing encoding": {ThreadID: "t", Events: []*tether.Event{ev}},
		"not an object":    {ThreadID: "t", Events: []*tether.Event{ev}, Encoded: [][]byte{[]byte(`[]`)}},
		"run of another thread": {ThreadID: "t", Runs: []*store.RunRecord{
			{Run: tether.Run{ID: "r", ThreadID: "u"}}}},
	}
	for name, b := range bad {
		if _, err := s.Commit(context.Background(), b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestCommitAbandoned cancels Commit calls while the writer is stalled: each
// returns its context's error and the store stays consistent.
func TestCommitAbandoned(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "tether.db"), sqlitestore.Options{})
	commitOne(t, s, "t", true, 0)
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	s.SetNotify(func(c *store.Committed) {
		if c.ThreadID == "stall" {
			entered <- struct{}{}
			<-release
		}
	})
	done := make(chan error, 1)
	go func() { _, err := commitBatch(s, "stall", true, 0); done <- err }()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	ev := &tether.Event{Type: tether.EventCustom, TS: tether.Now()}
	enc, _ := ev.Encode()
	_, err := s.Commit(ctx, &store.Batch{ThreadID: "t", Version: 1, Events: []*tether.Event{ev}, Encoded: [][]byte{enc}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("abandoned commit: %v", err)
	}
	if ev.Offset != "" {
		t.Fatal("an abandoned batch got an offset")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Abandoned while queued: never committed.
	if tr, err := s.Thread(context.Background(), "t"); err != nil || tr.Version != 1 {
		t.Fatalf("thread: %+v %v", tr, err)
	}
	commitOne(t, s, "t", false, 1)
}

func commitBatch(s store.Store, thread string, create bool, version int64) (*store.Result, error) {
	ev := &tether.Event{Type: tether.EventCustom, TS: tether.Now(), Data: json.RawMessage(`{"x":1}`)}
	enc, err := ev.Encode()
	if err != nil {
		return nil, err
	}
	b := &store.Batch{ThreadID: thread, Create: create, Version: version, Events: []*tether.Event{ev}, Encoded: [][]byte{enc}}
	if create {
		now := tether.Now()
		b.Thread = &tether.Thread{ID: thread, Status: tether.ThreadIdle, CreatedAt: now, UpdatedAt: now}
	}
	return s.Commit(context.Background(), b)
}

func commitOne(tb testing.TB, s store.Store, thread string, create bool, version int64) *store.Result {
	tb.Helper()
	res, err := commitBatch(s, thread, create, version)
	if err != nil {
		tb.Fatal(err)
	}
	return res
}

// TestWALBounded appends without pause and checks that the checkpointer
// keeps the WAL from growing with the stream.
func TestWALBounded(t *testing.T) {
	defer sqlitestore.SetCheckpointing(5*time.Millisecond, 64)()
	path := filepath.Join(t.TempDir(), "tether.db")
	s := open(t, path, sqlitestore.Options{})
	const threads = 8
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range threads {
		id := fmt.Sprintf("t%d", i)
		commitOne(t, s, id, true, 0)
		wg.Go(func() {
			for version := int64(1); ; version++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := commitBatch(s, id, false, version); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var peak int64
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if fi, err := os.Stat(path + "-wal"); err == nil {
			peak = max(peak, fi.Size())
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("WAL peaked at %d KiB", peak>>10)
	// Unchecked, the WAL grows by tens of MiB a second here.
	if peak > 32<<20 {
		t.Fatalf("WAL grew to %d KiB", peak>>10)
	}
}
