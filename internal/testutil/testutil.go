// Package testutil holds helpers shared by tests: a real SQLite store under
// t.TempDir() and small polling helpers.
package testutil

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/tetherhq/tether/store/sqlitestore"
)

// OpenStore opens a SQLite store in dir (t.TempDir() if empty) and closes
// it when the test ends.
func OpenStore(t testing.TB, dir string) *sqlitestore.Store {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	st, err := sqlitestore.Open(filepath.Join(dir, "tether.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Eventually polls cond every 10ms until it holds or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
