package sqlitestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/sqlitestore"
)

// TestDiskFull fills the database up (SQLite's max_page_count, which fails
// writes with SQLITE_FULL as a full disk does) and checks that a commit
// refused for want of space is store.ErrUnavailable (the client's
// 503 unavailable: retry), not an internal fault; that it wrote nothing;
// and that the store commits again, after the acknowledged events, once
// there is room.
func TestDiskFull(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "tether.db"), sqlitestore.Options{})
	commitOne(t, s, "t", true, 0)
	limit, err := sqlitestore.SetMaxPages(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	big := json.RawMessage(`{"pad":"` + strings.Repeat("x", 64<<10) + `"}`)
	version, full := int64(1), error(nil)
	for range 1000 {
		ev := &tether.Event{Type: tether.EventCustom, TS: tether.Now(), Data: big}
		enc, err := ev.Encode()
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Commit(context.Background(), &store.Batch{ThreadID: "t", Version: version,
			Events: []*tether.Event{ev}, Encoded: [][]byte{enc}})
		if err != nil {
			full = err
			break
		}
		version++
	}
	if full == nil {
		t.Fatalf("1000 commits of 64 KiB fit in %d pages", limit)
	}
	if !errors.Is(full, store.ErrUnavailable) {
		t.Fatalf("commit on a full database: %v, want store.ErrUnavailable", full)
	}
	// A batch with a run is written under a savepoint: its failure is the
	// same.
	ev := &tether.Event{Type: tether.EventCustom, TS: tether.Now(), Data: big}
	enc, err := ev.Encode()
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Commit(context.Background(), &store.Batch{ThreadID: "t", Version: version,
		Events: []*tether.Event{ev}, Encoded: [][]byte{enc},
		Runs: []*store.RunRecord{{Run: tether.Run{ID: "run_1", ThreadID: "t", Status: tether.RunPending}}}})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("commit of a run on a full database: %v, want store.ErrUnavailable", err)
	}
	ctx := context.Background()
	if tr, err := s.Thread(ctx, "t"); err != nil || tr.Version != version {
		t.Fatalf("thread after the refused commit: %+v %v, want version %d", tr, err, version)
	}
	if _, err := sqlitestore.SetMaxPages(s, 1<<30); err != nil {
		t.Fatal(err)
	}
	res := commitOne(t, s, "t", false, version)
	recs, err := s.ReadEvents(ctx, "t", tether.OffsetStart, 10_000)
	if err != nil || int64(len(recs)) != version+1 || recs[len(recs)-1].Offset != res.Records[0].Offset {
		t.Fatalf("log after the disk had room again: %d records (want %d), %v", len(recs), version+1, err)
	}
}
