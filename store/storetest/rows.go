package storetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// newRun returns a run row with every field set.
func newRun(id, threadID string, status tether.RunStatus, key string) *store.RunRecord {
	now := tether.Now()
	r := &store.RunRecord{
		Run: tether.Run{
			ID: id, ThreadID: threadID, Agent: "demo", Status: status,
			Input:     tether.RunInput{Messages: []tether.InputMessage{{ID: "m1", Role: "user", Content: "hi"}}},
			Metadata:  json.RawMessage(`{"a":1}`),
			CreatedAt: now, LastUpdateAt: now, Attempt: 1,
		},
		IdempotencyKey: key,
		Multitask:      tether.MultitaskEnqueue,
		Lease: store.Lease{Token: "token-" + id, Owner: "worker-1", Node: "node-1", KeyID: "key-1",
			ExpiresAt: time.Now().Add(time.Minute), Resumable: true},
	}
	if status != tether.RunPending {
		r.Run.StartedAt = now
		r.Run.WorkerID = "worker-1"
	}
	if status.Terminal() {
		r.Run.CompletedAt = now
		r.Lease = store.Lease{}
	}
	if status == tether.RunError {
		r.Run.Error = &tether.ErrorInfo{Code: "internal", Message: "boom"}
	}
	if status == tether.RunWaiting {
		r.Run.Request = &tether.Request{ID: "q1", Kind: "approval", Payload: json.RawMessage(`{"x":true}`)}
	}
	return r
}

// sameRun compares run rows: the run as JSON, the rest field by field.
func sameRun(tb testing.TB, what string, got, want *store.RunRecord) {
	tb.Helper()
	g, _ := json.Marshal(got.Run)
	w, _ := json.Marshal(want.Run)
	if !bytes.Equal(g, w) {
		tb.Fatalf("%s: run\n%s\nwant\n%s", what, g, w)
	}
	gl, wl := got.Lease, want.Lease
	if got.IdempotencyKey != want.IdempotencyKey || got.Multitask != want.Multitask ||
		gl.Token != wl.Token || gl.Owner != wl.Owner || gl.Node != wl.Node || !gl.ExpiresAt.Equal(wl.ExpiresAt) ||
		gl.Resumable != wl.Resumable || gl.KeyID != wl.KeyID {
		tb.Fatalf("%s: key %q multitask %q lease %+v; want %q %q %+v", what,
			got.IdempotencyKey, got.Multitask, got.Lease, want.IdempotencyKey, want.Multitask, want.Lease)
	}
}

func runIDs(runs []*store.RunRecord) []string {
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.Run.ID
	}
	return ids
}

func activeRuns(tb testing.TB, st store.Store) []*store.RunRecord {
	tb.Helper()
	runs, err := st.ActiveRuns(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return runs
}

func testRuns(t *testing.T, s *suite) {
	st := s.fresh(t)
	if runs := activeRuns(t, st); len(runs) != 0 {
		t.Fatalf("a new store has active runs %v", runIDs(runs))
	}
	runs := map[string]*store.RunRecord{}
	put := func(threadID string, version int64, rs ...*store.RunRecord) {
		t.Helper()
		commit(t, st, &store.Batch{ThreadID: threadID, Version: version, Runs: rs})
		for _, r := range rs {
			runs[r.Run.ID] = r
		}
	}
	a := createBatch(t, "a", 1)
	a.Runs = []*store.RunRecord{newRun("r1", "a", tether.RunPending, "k1")}
	commit(t, st, a)
	runs["r1"] = a.Runs[0]
	commit(t, st, createBatch(t, "b", 0))

	put("a", 1, newRun("r2", "a", tether.RunRunning, ""))
	put("b", 0, newRun("r3", "b", tether.RunWaiting, "k1")) // a key is unique per thread only
	put("a", 1, newRun("r4", "a", tether.RunDone, "k4"))
	put("b", 0, newRun("r5", "b", tether.RunAborted, ""), newRun("r6", "b", tether.RunError, ""),
		newRun("r7", "b", tether.RunCancelled, "k7"), newRun("r8", "b", tether.RunPending, ""))

	for id, want := range runs {
		got, err := st.Run(ctx, id)
		if err != nil {
			t.Fatalf("Run(%s): %v", id, err)
		}
		sameRun(t, id, got, want)
	}
	byKey := []struct{ thread, key, want string }{
		{"a", "k1", "r1"}, {"b", "k1", "r3"}, {"a", "k4", "r4"}, {"b", "k7", "r7"},
		{"a", "k7", ""}, {"a", "", ""}, {"c", "k1", ""}, {"a", "nope", ""},
	}
	for _, c := range byKey {
		got, err := st.RunByKey(ctx, c.thread, c.key)
		if c.want == "" {
			wantErr(t, fmt.Sprintf("RunByKey(%s, %q)", c.thread, c.key), err, store.ErrNotFound)
			continue
		}
		if err != nil {
			t.Fatalf("RunByKey(%s, %s): %v", c.thread, c.key, err)
		}
		sameRun(t, "RunByKey "+c.key, got, runs[c.want])
	}
	if got := runIDs(activeRuns(t, st)); !slices.Equal(got, []string{"r1", "r2", "r3", "r8"}) {
		t.Fatalf("active runs %v, want [r1 r2 r3 r8]", got)
	}

	// Replacing a run keeps its place among the active runs.
	r1 := newRun("r1", "a", tether.RunRunning, "k1")
	r1.Lease = store.Lease{Token: "new", Owner: "worker-2", KeyID: "key-2", ExpiresAt: time.Now().Add(time.Hour)}
	put("a", 1, r1, newRun("r2", "a", tether.RunDone, ""))
	got, err := st.Run(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	sameRun(t, "replaced r1", got, r1)
	if got := runIDs(activeRuns(t, st)); !slices.Equal(got, []string{"r1", "r3", "r8"}) {
		t.Fatalf("active runs %v, want [r1 r3 r8]", got)
	}
	active := activeRuns(t, st)
	for _, r := range active {
		sameRun(t, "active "+r.Run.ID, r, runs[r.Run.ID])
	}

	// A run without lease expiry keeps the zero time.
	r9 := newRun("r9", "a", tether.RunRunning, "")
	r9.Lease = store.Lease{Token: "t", Owner: "in-process", Node: "node-2"}
	put("a", 1, r9)
	if got, err := st.Run(ctx, "r9"); err != nil || !got.Lease.ExpiresAt.IsZero() {
		t.Fatalf("Run(r9): %+v, %v; want a zero lease expiry", got, err)
	}
}

func testThreads(t *testing.T, s *suite) {
	st := s.fresh(t)
	statuses := []tether.ThreadStatus{tether.ThreadIdle, tether.ThreadBusy, tether.ThreadWaiting, tether.ThreadError}
	base := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	var all []tether.Thread
	const n = 60
	for i := range n {
		id := fmt.Sprintf("th-%02d", (i*37)%n) // ids not in time order
		b := createBatch(t, id, i%2)
		// Pairs share updated_at: the id breaks the tie.
		b.Thread.UpdatedAt = tether.At(base.Add(time.Duration(i/2) * time.Second))
		b.Thread.CreatedAt = tether.At(base)
		b.Thread.Status = statuses[i%len(statuses)]
		if i%5 == 0 {
			b.Thread.Metadata = nil
		}
		commit(t, st, b)
		th := *b.Thread
		if len(b.Events) == 0 {
			th.LastOffset = tether.OffsetStart
		}
		all = append(all, th)
	}
	sortThreads(all)

	list := func(q store.ThreadQuery) []tether.Thread {
		t.Helper()
		var got []tether.Thread
		for pages := 0; ; pages++ {
			if pages > n+1 {
				t.Fatal("listing does not end")
			}
			page, err := st.Threads(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			limit := q.Limit
			if limit <= 0 {
				limit = 50
			}
			if len(page.Threads) > limit {
				t.Fatalf("a page of %d threads with limit %d", len(page.Threads), limit)
			}
			got = append(got, page.Threads...)
			if page.Next == "" {
				return got
			}
			if len(page.Threads) == 0 {
				t.Fatal("an empty page with a cursor")
			}
			q.Cursor = page.Next
		}
	}
	same := func(what string, got, want []tether.Thread) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d threads, want %d", what, len(got), len(want))
		}
		for i := range got {
			sameThread(t, fmt.Sprintf("%s: thread %d", what, i), got[i], want[i])
		}
	}

	for _, limit := range []int{1, 5, 7, n - 1, n, n + 1, 1000} {
		same(fmt.Sprintf("limit %d", limit), list(store.ThreadQuery{Limit: limit}), all)
	}
	page, err := st.Threads(ctx, store.ThreadQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Threads) != 50 || page.Next == "" {
		t.Fatalf("default limit: %d threads, next %q; want 50 and a cursor", len(page.Threads), page.Next)
	}
	same("default limit", list(store.ThreadQuery{}), all)
	page, err = st.Threads(ctx, store.ThreadQuery{Limit: 5000})
	if err != nil {
		t.Fatal(err)
	}
	same("limit above the maximum", page.Threads, all)

	for _, status := range statuses {
		var want []tether.Thread
		for _, th := range all {
			if th.Status == status {
				want = append(want, th)
			}
		}
		same("status "+string(status), list(store.ThreadQuery{Status: status, Limit: 4}), want)
	}
	if got := list(store.ThreadQuery{Status: "nope"}); len(got) != 0 {
		t.Fatalf("status nope: %d threads", len(got))
	}

	// An update moves a thread to the front.
	moved := all[n-1]
	tr := threadOf(t, st, moved.ID)
	b := appendBatch(t, moved.ID, tr.Version, 1, "move")
	row := tr.Thread
	row.UpdatedAt = tether.At(base.Add(time.Hour))
	b.Thread = &row
	res := commit(t, st, b)
	row.LastOffset = res.Records[0].Offset
	all = append([]tether.Thread{row}, all[:n-1]...)
	same("after an update", list(store.ThreadQuery{Limit: 7}), all)

	if _, err := st.Threads(ctx, store.ThreadQuery{Cursor: "!!not a cursor!!"}); err == nil {
		t.Fatal("a malformed cursor was accepted")
	}
}

// sortThreads sorts as a listing does: most recently updated first, then
// by descending id.
func sortThreads(ths []tether.Thread) {
	slices.SortFunc(ths, func(a, b tether.Thread) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt.Time); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
}

func testCheckpoint(t *testing.T, s *suite) {
	st := s.fresh(t)
	recs := commit(t, st, createBatch(t, "t", 3)).Records
	_, _, err := st.Checkpoint(ctx, "t")
	wantErr(t, "Checkpoint before any", err, store.ErrNotFound)
	for i, data := range [][]byte{[]byte(`{"state":1}`), {0, 1, 2, 255}, {}} {
		if err := st.SaveCheckpoint(ctx, "t", recs[i].Offset, data); err != nil {
			t.Fatal(err)
		}
		off, got, err := st.Checkpoint(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		if off != recs[i].Offset || !bytes.Equal(got, data) {
			t.Fatalf("checkpoint %d: %q %q, want %q %q", i, off, got, recs[i].Offset, data)
		}
	}
	err = st.SaveCheckpoint(ctx, "nope", recs[0].Offset, []byte("x"))
	wantErr(t, "SaveCheckpoint of an unknown thread", err, store.ErrNotFound)
}

func testDeleteThread(t *testing.T, s *suite) {
	st := s.fresh(t)
	d := createBatch(t, "d", 5)
	d.Runs = []*store.RunRecord{newRun("rd", "d", tether.RunRunning, "kd")}
	old := commit(t, st, d).Records
	e := createBatch(t, "e", 2)
	e.Runs = []*store.RunRecord{newRun("re", "e", tether.RunPending, "kd")}
	eRecs := commit(t, st, e).Records
	old = append(old, commit(t, st, appendBatch(t, "d", 5, 3, "more")).Records...)
	if err := st.SaveCheckpoint(ctx, "d", old[4].Offset, []byte("state")); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveCheckpoint(ctx, "e", eRecs[1].Offset, []byte("e-state")); err != nil {
		t.Fatal(err)
	}
	highest := maxOffset(old, eRecs)

	if err := st.DeleteThread(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	_, err := st.Thread(ctx, "d")
	wantErr(t, "Thread after delete", err, store.ErrNotFound)
	_, err = st.ReadEvents(ctx, "d", tether.OffsetStart, 10)
	wantErr(t, "ReadEvents after delete", err, store.ErrNotFound)
	_, err = st.Run(ctx, "rd")
	wantErr(t, "Run after delete", err, store.ErrNotFound)
	_, err = st.RunByKey(ctx, "d", "kd")
	wantErr(t, "RunByKey after delete", err, store.ErrNotFound)
	_, _, err = st.Checkpoint(ctx, "d")
	wantErr(t, "Checkpoint after delete", err, store.ErrNotFound)
	err = st.DeleteThread(ctx, "d")
	wantErr(t, "DeleteThread twice", err, store.ErrNotFound)
	_, err = st.Commit(ctx, appendBatch(t, "d", 8, 1, "late"))
	wantErr(t, "Commit after delete", err, store.ErrNotFound)
	if got := runIDs(activeRuns(t, st)); !slices.Equal(got, []string{"re"}) {
		t.Fatalf("active runs %v after delete, want [re]", got)
	}
	page, err := st.Threads(ctx, store.ThreadQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Threads) != 1 || page.Threads[0].ID != "e" {
		t.Fatalf("listing after delete: %v", page.Threads)
	}

	// The other thread is untouched.
	sameRecords(t, "other thread", readAll(t, st, "e"), eRecs)
	if off, data, err := st.Checkpoint(ctx, "e"); err != nil || off != eRecs[1].Offset || string(data) != "e-state" {
		t.Fatalf("other checkpoint: %q %q %v", off, data, err)
	}
	if _, err := st.RunByKey(ctx, "e", "kd"); err != nil {
		t.Fatal(err)
	}

	// A new thread with the same id starts over, above every old offset.
	again := createBatch(t, "d", 3)
	again.Runs = []*store.RunRecord{newRun("rd", "d", tether.RunPending, "kd")}
	res := commit(t, st, again)
	if res.Before != tether.OffsetStart || res.Version != 3 {
		t.Fatalf("recreated thread: Before %q Version %d", res.Before, res.Version)
	}
	for _, r := range res.Records {
		if !r.Offset.After(highest) {
			t.Fatalf("new offset %q is not above the deleted thread's %q", r.Offset, highest)
		}
	}
	sameRecords(t, "recreated log", readAll(t, st, "d"), res.Records)
	for _, o := range []tether.Offset{old[0].Offset, old[len(old)-1].Offset} {
		_, err = st.ReadEvents(ctx, "d", o, 10)
		wantErr(t, "read the new thread from a deleted offset", err, store.ErrOffsetNotFound)
	}
	if tr := threadOf(t, st, "d"); tr.Version != 3 {
		t.Fatalf("version %d, want 3", tr.Version)
	}
}

// testNamespaces checks ThreadQuery.Namespace: the default listing holds
// only IDs without a ":", and a namespace lists exactly its own IDs, with
// paging and the status filter.
func testNamespaces(t *testing.T, s *suite) {
	st := s.fresh(t)
	base := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	ids := []string{"plain-a", "ds:x/y", "plain-b", "ds:z", "dssub:q", "ds:", "d", "ds;x", "ds:a:b"}
	byID := make(map[string]tether.Thread)
	for i, id := range ids {
		b := createBatch(t, id, i%2)
		b.Thread.UpdatedAt = tether.At(base.Add(time.Duration(i) * time.Second))
		b.Thread.CreatedAt = tether.At(base)
		if strings.HasPrefix(id, "ds:") && i%2 == 1 {
			b.Thread.Status = tether.ThreadBusy
		}
		commit(t, st, b)
		th := *b.Thread
		if len(b.Events) == 0 {
			th.LastOffset = tether.OffsetStart
		}
		byID[id] = th
	}
	want := func(ids ...string) []tether.Thread {
		var out []tether.Thread
		for _, id := range ids {
			out = append(out, byID[id])
		}
		sortThreads(out)
		return out
	}
	list := func(q store.ThreadQuery) []tether.Thread {
		t.Helper()
		var got []tether.Thread
		for pages := 0; ; pages++ {
			if pages > len(ids)+1 {
				t.Fatal("listing does not end")
			}
			page, err := st.Threads(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, page.Threads...)
			if page.Next == "" {
				return got
			}
			q.Cursor = page.Next
		}
	}
	same := func(what string, got, want []tether.Thread) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d threads, want %d", what, len(got), len(want))
		}
		for i := range got {
			sameThread(t, fmt.Sprintf("%s: thread %d", what, i), got[i], want[i])
		}
	}
	for _, limit := range []int{1, 2, 50} {
		same(fmt.Sprintf("default namespace, limit %d", limit), list(store.ThreadQuery{Limit: limit}),
			want("plain-a", "plain-b", "d", "ds;x"))
		same(fmt.Sprintf("namespace ds, limit %d", limit), list(store.ThreadQuery{Namespace: "ds", Limit: limit}),
			want("ds:x/y", "ds:z", "ds:", "ds:a:b"))
		same(fmt.Sprintf("namespace dssub, limit %d", limit), list(store.ThreadQuery{Namespace: "dssub", Limit: limit}),
			want("dssub:q"))
	}
	same("namespace ds, status busy", list(store.ThreadQuery{Namespace: "ds", Status: tether.ThreadBusy, Limit: 1}),
		want("ds:x/y", "ds:z", "ds:"))
	same("namespace nope", list(store.ThreadQuery{Namespace: "nope"}), nil)
}

// testOwners checks that a thread keeps its owner (set at creation, kept
// by later batches that write the row) and ThreadQuery.Visible: a user's
// listing holds its own threads and those its patterns match, with paging
// and the status filter, and never a thread without an owner by owner.
func testOwners(t *testing.T, s *suite) {
	st := s.fresh(t)
	base := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	owners := map[string]string{"a1": "alice", "a2": "alice", "b1": "bob", "shared-1": "bob", "shared-2": "", "none": "", "alice": ""}
	byID := make(map[string]tether.Thread)
	i := 0
	for _, id := range []string{"a1", "a2", "b1", "shared-1", "shared-2", "none", "alice"} {
		b := createBatch(t, id, 1)
		b.Thread.Owner = owners[id]
		b.Thread.UpdatedAt = tether.At(base.Add(time.Duration(i) * time.Second))
		b.Thread.CreatedAt = tether.At(base)
		if id == "a2" || id == "shared-2" {
			b.Thread.Status = tether.ThreadBusy
		}
		commit(t, st, b)
		byID[id] = *b.Thread
		i++
	}
	// A later batch that writes the row keeps the owner.
	b := appendBatch(t, "a1", 1, 1, "a1-more")
	row := byID["a1"]
	row.UpdatedAt = tether.At(base.Add(time.Minute))
	b.Thread = &row
	commit(t, st, b)
	byID["a1"] = row
	for id, owner := range owners {
		tr, err := st.Thread(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Thread.Owner != owner {
			t.Fatalf("thread %s: owner %q, want %q", id, tr.Thread.Owner, owner)
		}
		ld, err := st.LoadThread(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if ld.Thread.Thread.Owner != owner {
			t.Fatalf("thread %s loaded: owner %q, want %q", id, ld.Thread.Thread.Owner, owner)
		}
	}
	list := func(q store.ThreadQuery) []string {
		t.Helper()
		var got []string
		for pages := 0; ; pages++ {
			if pages > len(owners)+1 {
				t.Fatal("listing does not end")
			}
			page, err := st.Threads(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, th := range page.Threads {
				got = append(got, th.ID)
				if th.Owner != owners[th.ID] {
					t.Fatalf("listed thread %s: owner %q, want %q", th.ID, th.Owner, owners[th.ID])
				}
			}
			if page.Next == "" {
				return got
			}
			q.Cursor = page.Next
		}
	}
	for _, c := range []struct {
		v      store.Visibility
		status tether.ThreadStatus
		want   []string // newest first
	}{
		{store.Visibility{Owner: "alice"}, "", []string{"a1", "a2"}},
		{store.Visibility{Owner: "bob"}, "", []string{"shared-1", "b1"}},
		{store.Visibility{Owner: "alice", Patterns: []string{"shared-*"}}, "", []string{"a1", "shared-2", "shared-1", "a2"}},
		{store.Visibility{Owner: "alice", Patterns: []string{"shared-*"}}, tether.ThreadBusy, []string{"shared-2", "a2"}},
		{store.Visibility{Owner: "carol", Patterns: []string{"none", "b1"}}, "", []string{"none", "b1"}},
		{store.Visibility{Owner: "carol"}, "", nil},
		{store.Visibility{Owner: ""}, "", nil}, // no owner is nobody's
		{store.Visibility{Owner: "x", Patterns: []string{"*"}}, "", []string{"a1", "alice", "none", "shared-2", "shared-1", "b1", "a2"}},
	} {
		for _, limit := range []int{1, 3, 50} {
			v := c.v
			got := list(store.ThreadQuery{Visible: &v, Status: c.status, Limit: limit})
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("visible to %+v, status %q, limit %d: %v, want %v", c.v, c.status, limit, got, c.want)
			}
		}
	}
}
