package storetest

import (
	"context"
	"encoding/json"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

func testCreateThread(t *testing.T, s *suite) {
	st := s.fresh(t)

	// Without events.
	b := createBatch(t, "empty", 0)
	res := commit(t, st, b)
	if res.Before != tether.OffsetStart || res.Version != 0 {
		t.Fatalf("create: Before %q, Version %d; want OffsetStart, 0", res.Before, res.Version)
	}
	tr := threadOf(t, st, "empty")
	want := *b.Thread
	want.LastOffset = tether.OffsetStart
	sameThread(t, "empty thread", tr.Thread, want)
	if tr.Version != 0 {
		t.Fatalf("version %d, want 0", tr.Version)
	}
	if recs, err := st.ReadEvents(ctx, "empty", tether.OffsetStart, 10); err != nil || len(recs) != 0 {
		t.Fatalf("read empty thread: %d records, %v", len(recs), err)
	}

	// With events; Version is ignored with Create.
	b = createBatch(t, "full", 3)
	b.Version = 42
	res = commit(t, st, b)
	if res.Before != tether.OffsetStart || res.Version != 3 {
		t.Fatalf("create: Before %q, Version %d; want OffsetStart, 3", res.Before, res.Version)
	}
	tr = threadOf(t, st, "full")
	want = *b.Thread
	want.LastOffset = res.Records[2].Offset
	sameThread(t, "thread", tr.Thread, want)
	if tr.Version != 3 {
		t.Fatalf("version %d, want 3", tr.Version)
	}
	sameRecords(t, "log", readAll(t, st, "full"), res.Records)

	// Again: ErrExists, and nothing changes.
	again := createBatch(t, "full", 2)
	again.Thread.Status = tether.ThreadBusy
	_, err := st.Commit(ctx, again)
	wantErr(t, "create an existing thread", err, store.ErrExists)
	tr = threadOf(t, st, "full")
	sameThread(t, "thread after a failed create", tr.Thread, want)
	if tr.Version != 3 {
		t.Fatalf("version %d after a failed create, want 3", tr.Version)
	}
	sameRecords(t, "log after a failed create", readAll(t, st, "full"), res.Records)
}

func testNotFound(t *testing.T, s *suite) {
	st := s.fresh(t)
	commit(t, st, createBatch(t, "other", 2))

	_, err := st.Commit(ctx, appendBatch(t, "nope", 0, 1, "x"))
	wantErr(t, "Commit", err, store.ErrNotFound)
	_, err = st.Commit(ctx, &store.Batch{ThreadID: "nope", Runs: []*store.RunRecord{newRun("r", "nope", tether.RunPending, "")}})
	wantErr(t, "Commit (runs only)", err, store.ErrNotFound)
	if _, err := st.Run(ctx, "r"); err == nil {
		t.Fatal("a run of a failed batch was written")
	}
	_, err = st.Thread(ctx, "nope")
	wantErr(t, "Thread", err, store.ErrNotFound)
	_, err = st.ReadEvents(ctx, "nope", tether.OffsetStart, 10)
	wantErr(t, "ReadEvents", err, store.ErrNotFound)
	_, err = st.ReadEvents(ctx, "nope", tether.FormatOffset(1, 1), 10)
	wantErr(t, "ReadEvents with a cursor", err, store.ErrNotFound)
	err = st.DeleteThread(ctx, "nope")
	wantErr(t, "DeleteThread", err, store.ErrNotFound)
	_, err = st.Run(ctx, "nope")
	wantErr(t, "Run", err, store.ErrNotFound)
	_, err = st.RunByKey(ctx, "other", "nope")
	wantErr(t, "RunByKey", err, store.ErrNotFound)
	_, err = st.RunByKey(ctx, "nope", "nope")
	wantErr(t, "RunByKey (no thread)", err, store.ErrNotFound)
	err = st.SaveCheckpoint(ctx, "nope", tether.FormatOffset(1, 1), []byte("x"))
	wantErr(t, "SaveCheckpoint", err, store.ErrNotFound)
	_, _, err = st.Checkpoint(ctx, "nope")
	wantErr(t, "Checkpoint (no thread)", err, store.ErrNotFound)
	_, _, err = st.Checkpoint(ctx, "other")
	wantErr(t, "Checkpoint (no checkpoint)", err, store.ErrNotFound)
	if _, err := st.Thread(ctx, "nope"); err == nil {
		t.Fatal("a failed commit created the thread")
	}
}

func testCommitAndRead(t *testing.T, s *suite) {
	st := s.fresh(t)
	var all []*tether.Record
	res := commit(t, st, createBatch(t, "t", 2))
	all = append(all, res.Records...)
	version := res.Version
	for i, n := range []int{1, 5, 0, 3, 10} {
		b := appendBatch(t, "t", version, n, "b"+string(rune('0'+i)))
		if i == 3 {
			now := tether.Now()
			b.Thread = &tether.Thread{ID: "t", Status: tether.ThreadBusy, Metadata: json.RawMessage(`{"n":2}`),
				CreatedAt: now, UpdatedAt: now, ActiveRunID: "run-t"}
		}
		res := commit(t, st, b)
		if res.Before != maxOffset(all) {
			t.Fatalf("batch %d: Before %q, want %q", i, res.Before, maxOffset(all))
		}
		if want := version + int64(n); res.Version != want {
			t.Fatalf("batch %d: Version %d, want %d", i, res.Version, want)
		}
		version = res.Version
		all = append(all, res.Records...)
		if b.Thread != nil {
			tr := threadOf(t, st, "t")
			want := *b.Thread
			want.LastOffset = maxOffset(all)
			sameThread(t, "updated thread", tr.Thread, want)
		}
	}
	for i := 1; i < len(all); i++ {
		if !all[i].Offset.After(all[i-1].Offset) {
			t.Fatalf("offset %q does not follow %q", all[i].Offset, all[i-1].Offset)
		}
	}
	sameRecords(t, "log", readAll(t, st, "t"), all)
	tr := threadOf(t, st, "t")
	if tr.Version != int64(len(all)) || tr.Thread.LastOffset != maxOffset(all) {
		t.Fatalf("thread: version %d, last offset %q; want %d, %q", tr.Version, tr.Thread.LastOffset, len(all), maxOffset(all))
	}
	// A batch without Thread leaves the row's fields (but not its log
	// position) alone.
	if tr.Thread.Status != tether.ThreadBusy || tr.Thread.ActiveRunID != "run-t" {
		t.Fatalf("thread fields lost: %+v", tr.Thread)
	}
	for i, r := range all {
		if p := payloadOf(t, r); p.I < 0 || (i > 0 && p.Tag == "") {
			t.Fatalf("record %d has payload %+v", i, p)
		}
	}
}

func testVersionConflict(t *testing.T, s *suite) {
	st := s.fresh(t)
	res := commit(t, st, createBatch(t, "t", 3))
	for _, v := range []int64{0, 2, 4, 100} {
		b := appendBatch(t, "t", v, 2, "conflict")
		b.Thread = &tether.Thread{ID: "t", Status: tether.ThreadError}
		b.Runs = []*store.RunRecord{newRun("r-conflict", "t", tether.RunPending, "k")}
		_, err := st.Commit(ctx, b)
		wantErr(t, "commit with a wrong version", err, store.ErrConflict)
		for _, e := range b.Events {
			if e.Offset != "" {
				t.Fatalf("a failed batch got offset %q", e.Offset)
			}
		}
	}
	tr := threadOf(t, st, "t")
	if tr.Version != 3 || tr.Thread.Status != tether.ThreadIdle || tr.Thread.LastOffset != res.Records[2].Offset {
		t.Fatalf("failed batches changed the thread: %+v", tr)
	}
	if _, err := st.Run(ctx, "r-conflict"); err == nil {
		t.Fatal("a failed batch wrote its run")
	}
	sameRecords(t, "log", readAll(t, st, "t"), res.Records)
	// Runs-only batches carry the precondition too.
	_, err := st.Commit(ctx, &store.Batch{ThreadID: "t", Version: 1, Runs: []*store.RunRecord{newRun("r2", "t", tether.RunPending, "")}})
	wantErr(t, "runs-only commit with a wrong version", err, store.ErrConflict)
	res2 := commit(t, st, &store.Batch{ThreadID: "t", Version: 3, Runs: []*store.RunRecord{newRun("r2", "t", tether.RunPending, "")}})
	if res2.Version != 3 || res2.Before != res.Records[2].Offset {
		t.Fatalf("runs-only commit: Version %d Before %q", res2.Version, res2.Before)
	}
	commit(t, st, appendBatch(t, "t", 3, 1, "ok"))
}

func testAtomicBatch(t *testing.T, s *suite) {
	st := s.fresh(t)
	b := createBatch(t, "t", 2)
	b.Runs = []*store.RunRecord{newRun("r1", "t", tether.RunPending, "key")}
	res := commit(t, st, b)
	before := threadOf(t, st, "t")

	// r2 takes r1's idempotency key: the whole batch fails.
	bad := appendBatch(t, "t", 2, 3, "bad")
	bad.Thread = &tether.Thread{ID: "t", Status: tether.ThreadBusy, ActiveRunID: "r2"}
	r1 := newRun("r1", "t", tether.RunRunning, "key")
	bad.Runs = []*store.RunRecord{r1, newRun("r2", "t", tether.RunPending, "key")}
	_, err := st.Commit(ctx, bad)
	wantErr(t, "a run with a taken idempotency key", err, store.ErrExists)

	after := threadOf(t, st, "t")
	if after.Version != 2 {
		t.Fatalf("version %d after a failed batch, want 2", after.Version)
	}
	sameThread(t, "thread after a failed batch", after.Thread, before.Thread)
	sameRecords(t, "log after a failed batch", readAll(t, st, "t"), res.Records)
	if _, err := st.Run(ctx, "r2"); err == nil {
		t.Fatal("the run of a failed batch was written")
	}
	got, err := st.Run(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	sameRun(t, "r1 after a failed batch", got, b.Runs[0])

	// The same batch with a free key commits, the same key on another
	// thread is fine.
	good := appendBatch(t, "t", 2, 3, "good")
	good.Runs = []*store.RunRecord{r1, newRun("r2", "t", tether.RunPending, "key2")}
	commit(t, st, good)
	other := createBatch(t, "u", 0)
	other.Runs = []*store.RunRecord{newRun("r3", "u", tether.RunPending, "key")}
	commit(t, st, other)
	got, err = st.Run(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	sameRun(t, "r1", got, r1)
}

func testContextDone(t *testing.T, s *suite) {
	st := s.fresh(t)
	commit(t, st, createBatch(t, "t", 1))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err := st.Commit(cctx, appendBatch(t, "t", 1, 2, "cancelled"))
	wantErr(t, "commit with a done context", err, context.Canceled)
	// Committed or not, the thread is consistent.
	tr := threadOf(t, st, "t")
	if n := len(readAll(t, st, "t")); int64(n) != tr.Version {
		t.Fatalf("log holds %d events, version is %d", n, tr.Version)
	}
	commit(t, st, appendBatch(t, "t", tr.Version, 1, "after"))
}

// testReadFromEveryOffset reads from each offset of a 1000-event log.
func testReadFromEveryOffset(t *testing.T, s *suite) {
	st := s.fresh(t)
	commit(t, st, createBatch(t, "t", 0))
	// Interleave another thread so that offsets of t are not contiguous.
	commit(t, st, createBatch(t, "u", 0))
	var all []*tether.Record
	for i := range 100 {
		all = append(all, commit(t, st, appendBatch(t, "t", int64(i*10), 10, "b")).Records...)
		commit(t, st, appendBatch(t, "u", int64(i), 1, "u"))
	}
	sameRecords(t, "whole log", readAll(t, st, "t"), all)
	recs, err := st.ReadEvents(ctx, "t", tether.OffsetStart, 2000)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, "read from the start", recs, all)
	for i, r := range all {
		// Under -race, most reads check the start of the suffix only.
		limit, want := 2000, all[i+1:]
		if raceEnabled && i%50 != 0 {
			limit = 20
			want = want[:min(limit, len(want))]
		}
		got, err := st.ReadEvents(ctx, "t", r.Offset, limit)
		if err != nil {
			t.Fatalf("read after event %d (%s): %v", i, r.Offset, err)
		}
		sameRecords(t, "read after event "+string(r.Offset), got, want)
	}
}

func testReadPaging(t *testing.T, s *suite) {
	st := s.fresh(t)
	var all []*tether.Record
	all = append(all, commit(t, st, createBatch(t, "t", 4)).Records...)
	for i := range 10 {
		all = append(all, commit(t, st, appendBatch(t, "t", int64(len(all)), i%4+1, "p")).Records...)
	}
	for _, limit := range []int{1, 2, 7, len(all) - 1, len(all), len(all) + 1} {
		var got []*tether.Record
		after := tether.OffsetStart
		for pages := 0; ; pages++ {
			if pages > len(all)+1 {
				t.Fatalf("limit %d: paging does not end", limit)
			}
			recs, err := st.ReadEvents(ctx, "t", after, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) > limit {
				t.Fatalf("limit %d: got %d records", limit, len(recs))
			}
			if want := min(limit, len(all)-len(got)); len(recs) != want {
				t.Fatalf("limit %d: a page of %d records, want %d", limit, len(recs), want)
			}
			if len(recs) == 0 {
				break
			}
			got = append(got, recs...)
			after = recs[len(recs)-1].Offset
		}
		sameRecords(t, "paged log", got, all)
	}
}

func testOffsetNotFound(t *testing.T, s *suite) {
	st := s.fresh(t)
	tRecs := commit(t, st, createBatch(t, "t", 5)).Records
	uRecs := commit(t, st, createBatch(t, "u", 5)).Records
	gone := commit(t, st, createBatch(t, "gone", 3)).Records
	tRecs = append(tRecs, commit(t, st, appendBatch(t, "t", 5, 5, "more")).Records...)
	if err := st.DeleteThread(ctx, "gone"); err != nil {
		t.Fatal(err)
	}

	epoch, seq, err := tether.ParseOffset(tRecs[3].Offset)
	if err != nil {
		t.Fatal(err)
	}
	lastEpoch, lastSeq, _ := tether.ParseOffset(tRecs[len(tRecs)-1].Offset)
	bad := map[string]tether.Offset{
		"malformed":              "garbage",
		"now":                    tether.OffsetNow,
		"of another thread":      uRecs[2].Offset,
		"of a deleted thread":    gone[1].Offset,
		"of the next epoch":      tether.FormatOffset(epoch+1, seq),
		"past the end":           tether.FormatOffset(lastEpoch, lastSeq+1000),
		"far past the end":       tether.FormatOffset(lastEpoch+1000, 1),
		"zero":                   tether.FormatOffset(0, 0),
		"maximal":                tether.Offset("9999999999_9999999999999999"),
		"of no event in epoch 1": tether.FormatOffset(1, 1),
		"of an epoch before all": tether.FormatOffset(0, seq),
		"of sequence 0":          tether.FormatOffset(epoch, 0),
	}
	if epoch > 0 {
		bad["of the previous epoch"] = tether.FormatOffset(epoch-1, seq)
	}
	for name, off := range bad {
		_, err := st.ReadEvents(ctx, "t", off, 10)
		wantErr(t, "read from an offset "+name+" ("+string(off)+")", err, store.ErrOffsetNotFound)
	}
	// The real offsets work, also around the deleted events.
	for _, i := range []int{3, 4, 9} {
		recs, err := st.ReadEvents(ctx, "t", tRecs[i].Offset, 100)
		if err != nil {
			t.Fatal(err)
		}
		sameRecords(t, "read after offset "+string(tRecs[i].Offset), recs, tRecs[i+1:])
	}
}
