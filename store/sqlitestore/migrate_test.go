package sqlitestore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/sqlitestore"
)

// A file of schema version 1 (leases without a key, no declared agents)
// opens: its runs read with an empty KeyID, new rows keep theirs, and
// agents can be declared.
func TestMigrateLeaseKeyID(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tether.db")
	s, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := tether.Now()
	old := &store.RunRecord{
		Run:   tether.Run{ID: "r1", ThreadID: "t1", Agent: "a", Status: tether.RunRunning, CreatedAt: now, LastUpdateAt: now, StartedAt: now, Attempt: 1},
		Lease: store.Lease{Token: "tok", Owner: "w1", ExpiresAt: time.Now().Add(time.Minute).Round(0)},
	}
	if _, err := s.Commit(ctx, &store.Batch{ThreadID: "t1", Create: true,
		Thread: &tether.Thread{ID: "t1", Status: tether.ThreadBusy, CreatedAt: now, UpdatedAt: now},
		Runs:   []*store.RunRecord{old}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Make it the file an older build wrote.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`ALTER TABLE runs DROP COLUMN lease_key_id`, `DROP TABLE agents`, `PRAGMA user_version = 1`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s = open(t, path, sqlitestore.Options{})
	got, err := s.Run(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Lease.Token != "tok" || got.Lease.Owner != "w1" || got.Lease.KeyID != "" || !got.Lease.ExpiresAt.Equal(old.Lease.ExpiresAt) {
		t.Fatalf("old row: %+v", got.Lease)
	}
	got.Lease.KeyID = "k1"
	if _, err := s.Commit(ctx, &store.Batch{ThreadID: "t1", Version: 0, Runs: []*store.RunRecord{got}}); err != nil {
		t.Fatal(err)
	}
	if again, err := s.Run(ctx, "r1"); err != nil || again.Lease.KeyID != "k1" {
		t.Fatalf("after the migration: %+v, %v", again, err)
	}
	if _, err := s.DeclareAgent(ctx, "mine", time.Now()); err != nil { // version 3's table
		t.Fatalf("declare an agent after the migration: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != 3 {
		t.Fatalf("user_version %d, %v; want 3", v, err)
	}
}
