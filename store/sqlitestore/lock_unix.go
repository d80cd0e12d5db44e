//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sqlitestore

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive lock on path for as long as the returned file
// is open. SQLite lets several processes share a file, but the writer keeps
// the thread states and the next event id in memory: a second writer would
// make both wrong. The lock is released when the process dies, so a crash
// never leaves it behind.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errors.New("the store is open in another process (another tether serve on this data directory?)")
		}
		return nil, fmt.Errorf("lock: %w", err)
	}
	return f, nil
}
