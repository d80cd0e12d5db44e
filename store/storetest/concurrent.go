package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// testNotify checks that every batch with events is reported once, in
// commit order, with the records Commit returns, before Commit returns.
func testNotify(t *testing.T, s *suite) {
	st := s.fresh(t)
	var (
		mu       sync.Mutex
		returned = map[string]bool{} // batch tag → its Commit returned
		got      []*store.Committed
		problems []string
	)
	st.SetNotify(func(c *store.Committed) {
		mu.Lock()
		defer mu.Unlock()
		if len(c.Records) == 0 || len(c.Events) != len(c.Records) {
			problems = append(problems, fmt.Sprintf("notified %d records and %d events", len(c.Records), len(c.Events)))
			return
		}
		tag := tagOf(c.Records[0])
		if returned[tag] {
			problems = append(problems, "batch "+tag+" notified after its Commit returned")
		}
		got = append(got, c)
	})

	const threads, perThread = 3, 30
	results := map[string]*store.Result{} // by tag
	var wg sync.WaitGroup
	for th := range threads {
		id := fmt.Sprintf("t%d", th)
		wg.Go(func() {
			b := createBatch(t, id, 2)
			tag := id + "-create"
			res, err := st.Commit(ctx, b)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			returned[tag], results[tag] = true, res
			mu.Unlock()
			version := res.Version
			for i := range perThread {
				tag := fmt.Sprintf("%s-%d", id, i)
				b := appendBatch(t, id, version, i%3+1, tag)
				res, err := st.Commit(ctx, b)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				returned[tag], results[tag] = true, res
				mu.Unlock()
				version = res.Version
			}
			// A batch without events is not reported.
			res, err = st.Commit(ctx, &store.Batch{ThreadID: id, Version: version,
				Runs: []*store.RunRecord{newRun("run-"+id, id, tether.RunPending, "")}})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Error(p)
	}
	if len(got) != threads*(perThread+1) {
		t.Fatalf("%d notifications, want %d", len(got), threads*(perThread+1))
	}
	last := map[string]tether.Offset{}
	seen := map[string]bool{}
	for _, c := range got {
		tag := payloadOf(t, c.Records[0]).Tag
		if seen[tag] {
			t.Fatalf("batch %s notified twice", tag)
		}
		seen[tag] = true
		res := results[tag]
		sameRecords(t, "notified batch "+tag, c.Records, res.Records)
		prev, ok := last[c.ThreadID]
		if !ok {
			prev = tether.OffsetStart
		}
		if c.Before != prev || c.Before != res.Before {
			t.Fatalf("batch %s: Before %q, want %q (previous batch) and %q (its result)", tag, c.Before, prev, res.Before)
		}
		for i, e := range c.Events {
			if e.Offset != c.Records[i].Offset {
				t.Fatalf("batch %s: event %d has offset %q, record %q", tag, i, e.Offset, c.Records[i].Offset)
			}
		}
		last[c.ThreadID] = c.Records[len(c.Records)-1].Offset
	}

	// nil removes the function.
	st.SetNotify(nil)
	tr := threadOf(t, st, "t0")
	commit(t, st, appendBatch(t, "t0", tr.Version, 1, "silent"))
	if len(got) != threads*(perThread+1) {
		t.Fatal("notified after SetNotify(nil)")
	}
}

// testConcurrentAppends has 50 goroutines append 200 batches each to 10
// threads. A mutex per thread keeps each batch's Version right, so every
// batch must commit, in the order the mutex let them through.
func testConcurrentAppends(t *testing.T, s *suite) {
	st := s.fresh(t)
	const threads, goroutines, batches = 10, 50, 200
	type thread struct {
		mu      sync.Mutex
		id      string
		version int64
		last    tether.Offset
		log     []*tether.Record
	}
	ths := make([]*thread, threads)
	for i := range ths {
		ths[i] = &thread{id: fmt.Sprintf("t%d", i), last: tether.OffsetStart}
		commit(t, st, createBatch(t, ths[i].id, 0))
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for k := range batches {
				th := ths[(g+k)%threads]
				n := (g+k)%3 + 1
				th.mu.Lock()
				b := appendBatch(t, th.id, th.version, n, fmt.Sprintf("g%d-%d", g, k))
				res, err := st.Commit(ctx, b)
				if err != nil {
					th.mu.Unlock()
					t.Errorf("commit %d of goroutine %d to %s: %v", k, g, th.id, err)
					return
				}
				if res.Version != th.version+int64(n) || res.Before != th.last || len(res.Records) != n {
					t.Errorf("%s: Version %d Before %q; want %d %q", th.id, res.Version, res.Before, th.version+int64(n), th.last)
				}
				th.version = res.Version
				th.last = res.Records[n-1].Offset
				th.log = append(th.log, res.Records...)
				th.mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	offsets := map[tether.Offset]string{}
	total := 0
	for _, th := range ths {
		log := readAll(t, st, th.id)
		sameRecords(t, th.id, log, th.log)
		for i, r := range log {
			if i > 0 && !r.Offset.After(log[i-1].Offset) {
				t.Fatalf("%s: offset %q does not follow %q", th.id, r.Offset, log[i-1].Offset)
			}
			if other, ok := offsets[r.Offset]; ok {
				t.Fatalf("offset %q used by %s and %s", r.Offset, other, th.id)
			}
			offsets[r.Offset] = th.id
		}
		if tr := threadOf(t, st, th.id); tr.Version != th.version || tr.Thread.LastOffset != th.last {
			t.Fatalf("%s: version %d last %q, want %d %q", th.id, tr.Version, tr.Thread.LastOffset, th.version, th.last)
		}
		total += len(log)
	}
	if want := goroutines * batches * 2; total != want {
		t.Fatalf("%d events in all, want %d", total, want)
	}
}

// blockNotify makes the notify function wait for release on the batch
// tagged tag, so that the batches the test issues meanwhile queue up behind
// it. entered is closed once the function waits.
func blockNotify(st store.Store, tag string) (entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	st.SetNotify(func(c *store.Committed) {
		if tagOf(c.Records[0]) == tag {
			once.Do(func() { close(entered) })
			select {
			case <-release:
			case <-time.After(deadline):
			}
		}
	})
	return entered, release
}

// testPipelining queues several batches of one thread behind one that has
// not completed, each with the Version the previous one leads to. The
// interface cannot tell when a Commit call has queued its batch, so the
// test staggers the calls; should the calls still overtake each other, the
// outcome must be a prefix (a batch after a failed one fails ErrConflict),
// and the test tries again, on a new thread.
func testPipelining(t *testing.T, s *suite) {
	st := s.fresh(t)
	const attempts, depth = 5, 8
	for attempt := range attempts {
		id := fmt.Sprintf("p%d", attempt)
		commit(t, st, createBatch(t, id, 0))
		head := fmt.Sprintf("%s-head", id)
		entered, release := blockNotify(st, head)

		var wg sync.WaitGroup
		var headErr error
		wg.Go(func() { _, headErr = st.Commit(ctx, appendBatch(t, id, 0, 2, head)) })
		select {
		case <-entered:
		case <-time.After(deadline):
			t.Fatal("the first batch was never notified")
		}
		batches := make([]*store.Batch, depth)
		results := make([]*store.Result, depth)
		errs := make([]error, depth)
		version := int64(2)
		for i := range batches {
			batches[i] = appendBatch(t, id, version, i%3+1, fmt.Sprintf("%s-%d", id, i))
			version += int64(len(batches[i].Events))
			wg.Go(func() { results[i], errs[i] = st.Commit(ctx, batches[i]) })
			time.Sleep(5 * time.Millisecond)
		}
		close(release)
		wg.Wait()
		st.SetNotify(nil)
		if headErr != nil {
			t.Fatal(headErr)
		}

		var want []*tether.Record
		want = append(want, readAll(t, st, id)[:2]...)
		failed := -1
		for i, err := range errs {
			switch {
			case err == nil && failed >= 0:
				t.Fatalf("batch %d committed after batch %d failed", i, failed)
			case err == nil:
				checkResult(t, batches[i], results[i])
				want = append(want, results[i].Records...)
			case !errors.Is(err, store.ErrConflict):
				t.Fatalf("pipelined batch %d: %v", i, err)
			case failed < 0:
				failed = i
			}
		}
		sameRecords(t, "pipelined log", readAll(t, st, id), want)
		if failed < 0 {
			return
		}
		t.Logf("attempt %d: batch %d overtook an earlier one; trying again", attempt, failed)
	}
	t.Fatalf("in %d attempts, the pipelined batches never all committed", attempts)
}

// testFailedBatchFailsPipelined checks that a batch queued behind a batch
// that fails does not commit: its Version counted the failed batch's events.
func testFailedBatchFailsPipelined(t *testing.T, s *suite) {
	st := s.fresh(t)
	b := createBatch(t, "t", 0)
	b.Runs = []*store.RunRecord{newRun("r0", "t", tether.RunPending, "taken")}
	commit(t, st, b)
	entered, release := blockNotify(st, "head")

	var wg sync.WaitGroup
	var headErr, badErr, nextErr error
	wg.Go(func() { _, headErr = st.Commit(ctx, appendBatch(t, "t", 0, 2, "head")) })
	select {
	case <-entered:
	case <-time.After(deadline):
		t.Fatal("the first batch was never notified")
	}
	bad := appendBatch(t, "t", 2, 2, "bad")
	bad.Runs = []*store.RunRecord{newRun("r1", "t", tether.RunPending, "taken")}
	wg.Go(func() { _, badErr = st.Commit(ctx, bad) })
	time.Sleep(5 * time.Millisecond)
	wg.Go(func() { _, nextErr = st.Commit(ctx, appendBatch(t, "t", 4, 1, "next")) })
	time.Sleep(5 * time.Millisecond)
	close(release)
	wg.Wait()
	st.SetNotify(nil)

	if headErr != nil {
		t.Fatal(headErr)
	}
	wantErr(t, "batch with a taken key", badErr, store.ErrExists)
	wantErr(t, "batch behind a failed batch", nextErr, store.ErrConflict)
	if tr := threadOf(t, st, "t"); tr.Version != 2 {
		t.Fatalf("version %d, want 2", tr.Version)
	}
	log := readAll(t, st, "t")
	if len(log) != 2 || payloadOf(t, log[0]).Tag != "head" {
		t.Fatalf("log holds %d events, want the 2 of the first batch", len(log))
	}
}
