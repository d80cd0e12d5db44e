package hub

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
)

var errOffsetNotFound = errors.New("test log: offset not found")

// testLog is an in-memory store: it assigns offsets (one sequence for all
// threads, as a store does), commits under a lock and then publishes, in
// commit order, exactly like the engine. Between the commit and the publish
// a History read already sees the batch, which is the window the handover
// must handle.
type testLog struct {
	hub *Hub

	mu      sync.RWMutex
	seq     uint64
	threads map[string][]*tether.Record

	pubMu sync.Mutex // held from commit to publish: publishes in commit order

	// yield, if set, makes append yield between commit and publish now and
	// then, widening the window in which History has records the hub has
	// not.
	yield atomic.Int64
	// skip, if set, makes append not publish one batch in skip: a gap in
	// what the hub is fed, which it must not pass on.
	skip atomic.Int64

	// readHook, if set, runs inside each History call after the log was read
	// and before the page is returned.
	readHook func(thread string)
	reads    int // History calls, guarded by mu
}

// newTestLog returns a log and a hub reading from it.
func newTestLog(t testing.TB, opts Options) (*testLog, *Hub) {
	l := &testLog{threads: make(map[string][]*tether.Record)}
	l.hub = New(l.history, opts)
	t.Cleanup(l.hub.Close)
	return l, l.hub
}

func newRecord(o tether.Offset, n int) *tether.Record {
	e := &tether.Event{Offset: o, Type: tether.EventTextDelta, Delta: fmt.Sprintf("d%08d", n)}
	data, err := e.Encode()
	if err != nil {
		panic(err)
	}
	return tether.NewRecord(e, tether.WithOffset(data, o))
}

// commit appends n records to a thread and returns them with the thread's
// last offset before them; it does not publish.
func (l *testLog) commit(thread string, n int) (tether.Offset, []*tether.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.commitLocked(thread, n)
}

func (l *testLog) commitLocked(thread string, n int) (tether.Offset, []*tether.Record) {
	log := l.threads[thread]
	before := tether.OffsetStart
	if len(log) > 0 {
		before = log[len(log)-1].Offset
	}
	recs := make([]*tether.Record, n)
	for i := range recs {
		l.seq++
		recs[i] = newRecord(tether.FormatOffset(7, l.seq), int(l.seq))
	}
	l.threads[thread] = append(log, recs...)
	return before, recs
}

// commitThenPublish commits n records and publishes them from another
// goroutine, keeping the commit order of publishes.
func (l *testLog) commitThenPublish(thread string, n int) {
	l.mu.Lock()
	before, recs := l.commitLocked(thread, n)
	l.pubMu.Lock()
	l.mu.Unlock()
	go func() {
		defer l.pubMu.Unlock()
		l.hub.Publish(thread, before, recs)
	}()
}

// append commits n records to a thread, then publishes them.
func (l *testLog) append(thread string, n int) []*tether.Record {
	l.mu.Lock()
	before, recs := l.commitLocked(thread, n)
	l.pubMu.Lock()
	l.mu.Unlock()
	if y := l.yield.Load(); y > 0 && rand.Int64N(y) == 0 {
		runtime.Gosched()
	}
	if y := l.skip.Load(); y == 0 || rand.Int64N(y) != 0 {
		l.hub.Publish(thread, before, recs)
	}
	l.pubMu.Unlock()
	return recs
}

// all returns the thread's log.
func (l *testLog) all(thread string) []*tether.Record {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return slices.Clone(l.threads[thread])
}

// after returns the thread's log after offset o.
func (l *testLog) after(thread string, o tether.Offset) []*tether.Record {
	log := l.all(thread)
	if o == tether.OffsetStart {
		return log
	}
	i := sort.Search(len(log), func(i int) bool { return log[i].Offset.Compare(o) > 0 })
	return log[i:]
}

// history is the log's History: it cuts a page at limit records and, past
// the first, at maxBytes bytes, as the stores do.
func (l *testLog) history(ctx context.Context, thread string, after tether.Offset, limit, maxBytes int) ([]*tether.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	l.mu.Lock()
	l.reads++
	log := l.threads[thread] // append-only: the prefix never changes
	hook := l.readHook
	l.mu.Unlock()
	i := 0
	if after != tether.OffsetStart {
		i = sort.Search(len(log), func(i int) bool { return log[i].Offset.Compare(after) >= 0 })
		if i == len(log) || log[i].Offset != after {
			return nil, false, fmt.Errorf("thread %s, offset %s: %w", thread, after, errOffsetNotFound)
		}
		i++
	}
	j, size := i, 0
	for j < len(log) && j-i < limit {
		size += log[j].Size()
		if maxBytes > 0 && j > i && size > maxBytes {
			break
		}
		j++
	}
	page := slices.Clone(log[i:j])
	if hook != nil {
		hook(thread)
	}
	return page, j < len(log), nil
}

func (l *testLog) readCount() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.reads
}

// drain calls Next until the subscriber has returned the record at offset
// last (or a later one), failing the test on an error.
func drain(t testing.TB, s *Subscriber, last tether.Offset) []*tether.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []*tether.Record
	for s.Offset().Compare(last) < 0 {
		recs, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("Next: %v (after %d records)", err, len(got))
		}
		got = append(got, recs...)
	}
	return got
}

// last returns the offset of the last record.
func last(recs []*tether.Record) tether.Offset { return recs[len(recs)-1].Offset }

// sameRecords fails the test unless got is want, record by record (the
// same pointers: records are shared, not copied).
func sameRecords(t testing.TB, got, want []*tether.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records (%s), want %d (%s)", len(got), span(got), len(want), span(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("record %d: got %s, want %s", i, got[i].Offset, want[i].Offset)
		}
	}
}

func span(recs []*tether.Record) string {
	if len(recs) == 0 {
		return "none"
	}
	return fmt.Sprintf("%s..%s", recs[0].Offset, recs[len(recs)-1].Offset)
}
