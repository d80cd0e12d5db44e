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

// A file of schema version 1 (leases without a key, no declared agents,
// threads without owners) opens: its runs read with an empty KeyID, new
// rows keep theirs, agents can be declared, its threads have no owner and
// new ones keep theirs.
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
	for _, q := range []string{`ALTER TABLE runs DROP COLUMN lease_key_id`, `DROP TABLE agents`,
		`DROP INDEX threads_by_owner`, `ALTER TABLE threads DROP COLUMN owner`,
		`ALTER TABLE threads DROP COLUMN producer_key`, `ALTER TABLE threads DROP COLUMN producer_epoch`,
		`ALTER TABLE threads DROP COLUMN producer_seq`, `PRAGMA user_version = 1`} {
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
	if tr, err := s.Thread(ctx, "t1"); err != nil || tr.Thread.Owner != "" { // version 4's column
		t.Fatalf("old thread after the migration: %+v, %v", tr, err)
	}
	if _, err := s.Commit(ctx, &store.Batch{ThreadID: "t2", Create: true,
		Thread: &tether.Thread{ID: "t2", Status: tether.ThreadIdle, CreatedAt: now, UpdatedAt: now, Owner: "alice"}}); err != nil {
		t.Fatal(err)
	}
	page, err := s.Threads(ctx, store.ThreadQuery{Visible: &store.Visibility{Owner: "alice"}})
	if err != nil || len(page.Threads) != 1 || page.Threads[0].Owner != "alice" {
		t.Fatalf("alice's threads after the migration: %+v, %v", page, err)
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
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != 5 {
		t.Fatalf("user_version %d, %v; want 5", v, err)
	}
}

// A file of schema version 4 kept every producer's state in the producers
// table. After the migration those states still read back, and the next
// append of one of them moves its state into the thread row without
// losing the others.
func TestMigrateProducers(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tether.db")
	s, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := tether.Now()
	res, err := s.Commit(ctx, &store.Batch{ThreadID: "t1", Create: true,
		Thread:    &tether.Thread{ID: "t1", Status: tether.ThreadBusy, CreatedAt: now, UpdatedAt: now},
		Producers: []store.Producer{{Key: "r1/a", Epoch: 1, Seq: 4}, {Key: "r1/b", Epoch: 2, Seq: 9}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Make it the file version 4 wrote: the thread row's producer in the
	// table, and no producer columns.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO producers (thread_id, key, epoch, seq)
			SELECT id, producer_key, producer_epoch, producer_seq FROM threads WHERE producer_key != ''`,
		`ALTER TABLE threads DROP COLUMN producer_key`, `ALTER TABLE threads DROP COLUMN producer_epoch`,
		`ALTER TABLE threads DROP COLUMN producer_seq`, `PRAGMA user_version = 4`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s = open(t, path, sqlitestore.Options{})
	want := func(what string, ps ...store.Producer) {
		t.Helper()
		for _, w := range ps {
			if got, err := s.Producer(ctx, "t1", w.Key); err != nil || *got != w {
				t.Fatalf("%s: producer %s is %+v, %v; want %+v", what, w.Key, got, err, w)
			}
		}
	}
	want("after the migration", store.Producer{Key: "r1/a", Epoch: 1, Seq: 4}, store.Producer{Key: "r1/b", Epoch: 2, Seq: 9})
	if _, err := s.Commit(ctx, &store.Batch{ThreadID: "t1", Version: res.Version,
		Producers: []store.Producer{{Key: "r1/a", Epoch: 1, Seq: 5}}}); err != nil {
		t.Fatal(err)
	}
	want("after an append", store.Producer{Key: "r1/a", Epoch: 1, Seq: 5}, store.Producer{Key: "r1/b", Epoch: 2, Seq: 9})
}
