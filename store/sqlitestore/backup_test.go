package sqlitestore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/sqlitestore"
)

// fakeClock is a clock that moves only when told to (and when the store
// waits on it: see sqlitestore.SetSleep).
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A server in a crash loop (restarted ten times a second, say, by its
// service manager) opens its store faster than the clock's seconds go by.
// A backup taken afterwards, then restored once the server that went on
// from it was lost, must not hand out the offsets that server handed out:
// a client holding one would resume after another event of the same
// offset and silently miss what lies between.
func TestRestoredBackupAfterCrashLoop(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	defer sqlitestore.SetSleep(clock.Advance)()
	dir := t.TempDir()
	path := filepath.Join(dir, "tether.db")
	opts := sqlitestore.Options{Now: clock.Now}

	s := open(t, path, opts)
	commitOne(t, s, "t", true, 0)
	s.Close()
	for range 30 {
		clock.Advance(100 * time.Millisecond)
		open(t, path, opts).Close()
	}
	backup := filepath.Join(dir, "backup.db")
	copyFile(t, path, backup) // stopped: the file alone holds everything

	// The server goes on from the backup's state, and hands out an offset.
	clock.Advance(time.Second)
	s = open(t, path, opts)
	lost := commitOne(t, s, "t", false, 1).Records[0].Offset
	s.Close()

	// Its disk is lost: the backup is restored and started.
	clock.Advance(10 * time.Second)
	copyFile(t, backup, path)
	s = open(t, path, opts)
	defer s.Close()
	if got := commitOne(t, s, "t", false, 1).Records[0].Offset; got == lost {
		t.Errorf("the restored backup handed out offset %s again", got)
	}
	// A client that read the lost event gets a reset, not a resume.
	recs, err := s.ReadEvents(context.Background(), "t", lost, 10)
	if !errors.Is(err, store.ErrOffsetNotFound) {
		t.Errorf("reading after the lost server's offset %s: %d records, %v; want ErrOffsetNotFound", lost, len(recs), err)
	}
}
