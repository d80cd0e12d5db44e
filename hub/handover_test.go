package hub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
)

func TestSubscribeFromHistory(t *testing.T) {
	l, h := newTestLog(t, Options{RingSize: 4, HistoryPage: 8})
	for i := 0; i < 20; i++ {
		l.append("a", 3)
	}
	log := l.all("a")
	for _, tc := range []struct {
		name  string
		after tether.Offset
	}{
		{"start", tether.OffsetStart},
		{"old", log[5].Offset},
		{"page boundary", log[59-16].Offset}, // the last page is full, the next empty
		{"just before the ring", log[54].Offset},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reads := l.readCount()
			s := h.Subscribe("a", tc.after)
			defer s.Close()
			sameRecords(t, drain(t, s, last(log)), l.after("a", tc.after))
			if l.readCount() == reads {
				t.Fatal("no History read")
			}
			more := l.append("a", 2)
			sameRecords(t, drain(t, s, last(more)), more)
			log = l.all("a")
		})
	}
	// The ring (4 records) covers its base and what follows.
	reads := l.readCount()
	s := h.Subscribe("a", log[len(log)-5].Offset)
	defer s.Close()
	sameRecords(t, drain(t, s, last(log)), log[len(log)-4:])
	if l.readCount() != reads {
		t.Fatal("a cursor at the ring's base read History")
	}
}

func TestHistoryPages(t *testing.T) {
	l, h := newTestLog(t, Options{RingSize: 1, HistoryPage: 5})
	l.append("a", 23)
	s := h.Subscribe("a", tether.OffsetStart)
	defer s.Close()
	var sizes []int
	var got []*tether.Record
	for s.Offset() != last(l.all("a")) {
		recs, err := s.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(recs))
		got = append(got, recs...)
	}
	sameRecords(t, got, l.all("a"))
	if fmt.Sprint(sizes) != "[5 5 5 5 3]" {
		t.Fatalf("pages of %v, want [5 5 5 5 3]", sizes)
	}
}

// TestHistoryPagesCutByBytes: a page cut short by HistoryBytes is not the
// end of the log. The subscriber reads on, page by page, each within the
// budget (a record over it comes alone), says it is behind until the last,
// takes in what is published meanwhile, and only then goes live.
func TestHistoryPagesCutByBytes(t *testing.T) {
	size := newRecord(tether.FormatOffset(7, 1), 1).Size()
	for _, tc := range []struct {
		name  string
		bytes int
		want  string
	}{
		{"three to a page", 3*size + size/2, "[3 3 3 3 3 3 3 2]"},
		{"records over the budget", size / 2, fmt.Sprint(slices.Repeat([]int{1}, 23))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, h := newTestLog(t, Options{RingSize: 1, HistoryBytes: tc.bytes})
			l.append("a", 23)
			s := h.Subscribe("a", tether.OffsetStart)
			defer s.Close()
			end := last(l.all("a"))
			var sizes []int
			var got []*tether.Record
			for s.Offset() != end {
				recs, err := s.Next(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				sizes = append(sizes, len(recs))
				got = append(got, recs...)
				if behind := s.Behind(); behind != (s.Offset() != end) {
					t.Fatalf("after %d records, Behind is %v", len(got), behind)
				}
			}
			if fmt.Sprint(sizes) != tc.want {
				t.Fatalf("pages of %v, want %v", sizes, tc.want)
			}
			more := l.append("a", 2)
			got = append(got, drain(t, s, last(more))...)
			sameRecords(t, got, l.all("a"))
		})
	}

	// Published during the catch-up: pending waits for the pages before it.
	l, h := newTestLog(t, Options{RingSize: 1, HistoryBytes: 2 * size})
	l.append("a", 9)
	reads := 0
	l.readHook = func(string) {
		if reads++; reads == 2 {
			l.append("a", 3)
		}
	}
	s := h.Subscribe("a", tether.OffsetStart)
	defer s.Close()
	got := drain(t, s, tether.FormatOffset(7, 12))
	l.readHook = nil
	more := l.append("a", 1)
	got = append(got, drain(t, s, last(more))...)
	sameRecords(t, got, l.all("a"))
}

func TestUnknownCursor(t *testing.T) {
	l, h := newTestLog(t, Options{})
	l.append("a", 5)
	// Between two offsets of the thread: sorts inside the ring but names no
	// event, so the store must decide.
	log := l.all("a")
	for _, after := range []tether.Offset{tether.FormatOffset(7, 0), tether.FormatOffset(9, 1), tether.FormatOffset(7, 999)} {
		s := h.Subscribe("a", after)
		_, err := s.Next(context.Background())
		if !errors.Is(err, errOffsetNotFound) {
			t.Errorf("Next after %s (log %s): %v, want errOffsetNotFound", after, span(log), err)
		}
		s.Close()
	}
}

func TestHistoryErrorIsRetried(t *testing.T) {
	l, _ := newTestLog(t, Options{RingSize: 2})
	fail := errors.New("disk on fire")
	calls := 0
	h := New(func(ctx context.Context, thread string, after tether.Offset, limit, maxBytes int) ([]*tether.Record, bool, error) {
		if calls++; calls == 1 {
			return nil, false, fail
		}
		return l.history(ctx, thread, after, limit, maxBytes)
	}, Options{RingSize: 2})
	defer h.Close()
	l.hub = h
	l.append("a", 5)
	s := h.Subscribe("a", tether.OffsetStart)
	defer s.Close()
	if _, err := s.Next(context.Background()); !errors.Is(err, fail) {
		t.Fatalf("Next: %v, want %v", err, fail)
	}
	sameRecords(t, drain(t, s, last(l.all("a"))), l.all("a"))
}

// TestHistoryBehindPublish gives the hub a History that misses published
// records (a broken store): Next returns an error instead of spinning.
func TestHistoryBehindPublish(t *testing.T) {
	h := New(noHistory, Options{})
	defer h.Close()
	s := h.Subscribe("a", tether.OffsetStart)
	defer s.Close()
	recs := benchRecords(10, 2)
	h.Publish("a", benchRecords(9, 1)[0].Offset, recs)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Next(ctx); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("Next returned no error")
	}
}

// TestHandoverCommittedNotPublished subscribes between a commit and its
// publish: History returns the batch, and so does the publish.
func TestHandoverCommittedNotPublished(t *testing.T) {
	l, h := newTestLog(t, Options{})
	l.commit("a", 3) // before the hub started: not in its ring
	before, recs := l.commit("a", 4)
	s := h.Subscribe("a", tether.OffsetStart)
	defer s.Close()
	h.Publish("a", before, recs)
	after, more := l.commit("a", 2)
	h.Publish("a", after, more)
	sameRecords(t, drain(t, s, last(more)), l.all("a"))
}

// TestHandoverReadBeforePublish reads a batch from History before it is
// published: the subscriber is live by then, and the publish repeats it.
func TestHandoverReadBeforePublish(t *testing.T) {
	l, h := newTestLog(t, Options{})
	l.commit("a", 3) // before the hub started
	before, recs := l.commit("a", 4)
	s := h.Subscribe("a", tether.OffsetStart)
	defer s.Close()
	got := drain(t, s, last(recs)) // from History, then live
	s.mu.Lock()
	live := !s.catchup
	s.mu.Unlock()
	if !live {
		t.Fatal("the subscriber is not live after a short page")
	}
	h.Publish("a", before, recs)
	after, more := l.commit("a", 2)
	h.Publish("a", after, append(recs[2:], more...)) // overlapping, not a gap
	after, more = l.commit("a", 2)
	h.Publish("a", after, more)
	got = append(got, drain(t, s, last(more))...)
	sameRecords(t, got, l.all("a"))
}

// TestHandoverPublishDuringRead publishes while a page is being read, in
// every position relative to the read.
func TestHandoverPublishDuringRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		page int
		hook func(l *testLog)
	}{
		{"append after the read", 100, func(l *testLog) { l.append("a", 3) }},
		{"append twice after the read", 100, func(l *testLog) { l.append("a", 3); l.append("a", 1) }},
		{"append after a full page", 4, func(l *testLog) { l.append("a", 3) }},
		{"commit after the read, publish later", 100, func(l *testLog) { l.commitThenPublish("a", 2) }},
		{"commit and publish later, twice", 100, func(l *testLog) { l.commitThenPublish("a", 2); l.commitThenPublish("a", 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := newTestLog(t, Options{})
			h := New(l.history, Options{HistoryPage: tc.page})
			defer h.Close()
			seed := New(l.history, Options{})
			l.hub = seed
			l.append("a", 10)
			seed.Close()
			l.hub = h

			hooked := false
			l.readHook = func(string) {
				if !hooked {
					hooked = true
					tc.hook(l)
				}
			}
			s := h.Subscribe("a", tether.OffsetStart)
			defer s.Close()
			got := drain(t, s, last(l.all("a")))
			l.readHook = nil
			more := l.append("a", 2)
			got = append(got, drain(t, s, last(more))...)
			sameRecords(t, got, l.all("a"))
		})
	}
}

// TestGap feeds the hub a gap: a batch is committed but never published.
// The ring resets and live subscribers fetch the missing records.
func TestGap(t *testing.T) {
	l, h := newTestLog(t, Options{})
	l.append("a", 5)
	live := h.Subscribe("a", last(l.all("a")))
	defer live.Close()
	if st := h.Stats(); st.RingRecords != 5 {
		t.Fatalf("ring holds %d records, want 5", st.RingRecords)
	}
	_, lost := l.commit("a", 3) // never published
	more := l.append("a", 2)
	if st := h.Stats(); st.RingRecords != 2 {
		t.Fatalf("after a gap the ring holds %d records, want 2", st.RingRecords)
	}
	reads := l.readCount()
	sameRecords(t, drain(t, live, last(more)), append(lost, more...))
	if l.readCount() == reads {
		t.Fatal("the live subscriber did not read History")
	}
	// A cursor inside the gap is not served from the ring.
	for _, after := range []tether.Offset{lost[0].Offset, lost[2].Offset, more[0].Offset} {
		s := h.Subscribe("a", after)
		sameRecords(t, drain(t, s, last(more)), l.after("a", after))
		s.Close()
	}

	// A gap while a subscriber catches up: pending restarts.
	l.readHook = func(string) {
		l.readHook = nil
		l.append("a", 1)
		l.commit("a", 2)
		l.append("a", 1)
	}
	s := h.Subscribe("a", tether.OffsetStart)
	defer s.Close()
	l.append("a", 1) // published before the first read: pending
	got := drain(t, s, last(l.all("a")))
	got = append(got, drain(t, s, last(l.all("a")))...) // what the hook added
	sameRecords(t, got, l.all("a"))
}
