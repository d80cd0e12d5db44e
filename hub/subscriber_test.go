package hub

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	tether "github.com/tetherhq/tether"
)

func TestCoalescing(t *testing.T) {
	l, h := newTestLog(t, Options{})
	l.append("a", 1)
	s := h.Subscribe("a", last(l.all("a")))
	defer s.Close()
	var want []*tether.Record
	for i := 0; i < 5; i++ {
		want = append(want, l.append("a", 3)...)
	}
	got, err := s.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, got, want)
}

// TestNextReusesSlice checks the documented reuse: the slice returned by
// Next is emptied by the next call, so a caller that keeps it fails loudly.
func TestNextReusesSlice(t *testing.T) {
	l, h := newTestLog(t, Options{})
	l.append("a", 1)
	s := h.Subscribe("a", last(l.all("a")))
	defer s.Close()
	ctx := context.Background()
	want := l.append("a", 2)
	first, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, first, want)
	want = l.append("a", 2)
	second, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, second, want)
	if first[0] != nil {
		t.Fatal("the slice returned by the previous call still holds records")
	}
}

func TestSlowSubscriber(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"events", Options{BufferEvents: 10}},
		{"bytes", Options{BufferBytes: 10 * newRecord(tether.FormatOffset(7, 1), 1).Size()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, h := newTestLog(t, tc.opts)
			l.append("a", 1)
			s := h.Subscribe("a", last(l.all("a")))
			defer s.Close()
			fast := h.Subscribe("a", last(l.all("a")))
			defer fast.Close()
			var fastGot []*tether.Record
			for i := 0; i < 25; i++ {
				l.append("a", 1)
				s.mu.Lock()
				n := len(s.queue) + len(s.pending)
				s.mu.Unlock()
				if n > 10 {
					t.Fatalf("slow subscriber holds %d records, bound 10", n)
				}
				recs, err := fast.TryNext(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				fastGot = append(fastGot, recs...)
			}
			if st := h.Stats(); st.Subscribers != 1 {
				t.Fatalf("%d subscribers after the cut, want 1", st.Subscribers)
			}
			log := l.all("a")
			sameRecords(t, fastGot, log[1:])
			got, err := s.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			sameRecords(t, got, log[1:11])
			if _, err := s.Next(context.Background()); !errors.Is(err, ErrSlow) {
				t.Fatalf("Next after the queue: %v, want ErrSlow", err)
			}
			if _, err := s.Next(context.Background()); !errors.Is(err, ErrSlow) {
				t.Fatalf("Next again: %v, want ErrSlow", err)
			}
			// The cursor resumes where the cut stream ended.
			r := h.Subscribe("a", s.Offset())
			defer r.Close()
			sameRecords(t, drain(t, r, last(log)), log[11:])
		})
	}
}

// TestBatchLargerThanBuffer: a subscriber with nothing queued takes one
// batch larger than its buffer (it is not behind: cutting it would cut
// every reader of the thread, however fast, at each large append); a
// second batch while the first is unread cuts it.
func TestBatchLargerThanBuffer(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"events", Options{BufferEvents: 10}},
		{"bytes", Options{BufferBytes: 10 * newRecord(tether.FormatOffset(7, 1), 1).Size()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, h := newTestLog(t, tc.opts)
			l.append("a", 1)
			s := h.Subscribe("a", last(l.all("a")))
			defer s.Close()
			want := l.append("a", 25)
			got, err := s.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			sameRecords(t, got, want)
			// The next batch is taken too (the queue is empty again); one
			// more while it is unread is over the buffer: cut, after it.
			want = l.append("a", 25)
			l.append("a", 1)
			got, err = s.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			sameRecords(t, got, want)
			if _, err := s.Next(context.Background()); !errors.Is(err, ErrSlow) {
				t.Fatalf("Next after a batch came over a full queue: %v, want ErrSlow", err)
			}
		})
	}
}

// TestSlowDuringCatchup cuts a subscriber whose pending records overflow
// while it reads History.
func TestSlowDuringCatchup(t *testing.T) {
	l, h := newTestLog(t, Options{RingSize: 2, BufferEvents: 5, HistoryPage: 3})
	l.append("a", 10)
	s := h.Subscribe("a", tether.OffsetStart)
	defer s.Close()
	for i := 0; i < 6; i++ {
		l.append("a", 1) // pending: 6 > 5
	}
	var got []*tether.Record
	var err error
	for {
		var recs []*tether.Record
		recs, err = s.Next(context.Background())
		if err != nil {
			break
		}
		got = append(got, recs...)
	}
	if !errors.Is(err, ErrSlow) {
		t.Fatalf("Next: %v, want ErrSlow", err)
	}
	log := l.all("a")
	sameRecords(t, got, log[:len(got)])
	if len(got) > 0 && s.Offset() != last(got) || len(got) == 0 && s.Offset() != tether.OffsetStart {
		t.Fatalf("Offset() = %s after %d records", s.Offset(), len(got))
	}
	r := h.Subscribe("a", s.Offset())
	defer r.Close()
	sameRecords(t, drain(t, r, last(log)), log[len(got):])
}

// TestSubscribeBeyondBuffer subscribes from a ring holding more than the
// subscriber's buffer: the rest is read from History, not cut.
func TestSubscribeBeyondBuffer(t *testing.T) {
	l, h := newTestLog(t, Options{BufferEvents: 8, HistoryPage: 4})
	l.append("a", 30)
	s := h.Subscribe("a", tether.OffsetStart)
	defer s.Close()
	sameRecords(t, drain(t, s, last(l.all("a"))), l.all("a"))
}

func TestSubscriberClose(t *testing.T) {
	l, h := newTestLog(t, Options{})
	l.append("a", 3)
	s := h.Subscribe("a", tether.OffsetStart)
	s.Close()
	s.Close()
	if _, err := s.Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next: %v, want ErrClosed", err)
	}
	if st := h.Stats(); st.Subscribers != 0 || st.Topics != 1 {
		t.Fatalf("stats: %+v", st)
	}
	// A topic created by Subscribe alone is dropped with its last subscriber.
	s = h.Subscribe("never", tether.OffsetStart)
	if st := h.Stats(); st.Topics != 2 {
		t.Fatalf("topics: %d, want 2", st.Topics)
	}
	s.Close()
	if st := h.Stats(); st.Topics != 1 {
		t.Fatalf("topics: %d, want 1", st.Topics)
	}
}

func TestReadyAndTryNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, h := newTestLog(t, Options{RingSize: 2, HistoryPage: 2})
		l.append("a", 5)
		ctx := context.Background()

		// Catching up: Ready fires and each TryNext reads one page.
		s := h.Subscribe("a", tether.OffsetStart)
		defer s.Close()
		var got []*tether.Record
		for s.Offset() != last(l.all("a")) {
			select {
			case <-s.Ready():
			default:
				t.Fatalf("Ready not signalled while catching up (after %d records)", len(got))
			}
			reads := l.readCount()
			recs, err := s.TryNext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if l.readCount() > reads+1 {
				t.Fatal("TryNext read more than one page")
			}
			got = append(got, recs...)
		}
		sameRecords(t, got, l.all("a"))

		// Live: nothing ready, then a publish signals Ready.
		for range 2 { // drain a possibly spurious signal
			if recs, err := s.TryNext(ctx); recs != nil || err != nil {
				t.Fatalf("TryNext = %d records, %v; want nothing", len(recs), err)
			}
			select {
			case <-s.Ready():
			default:
			}
		}
		select {
		case <-s.Ready():
			t.Fatal("Ready signalled with nothing to read")
		default:
		}
		more := l.append("a", 2)
		select {
		case <-s.Ready():
		default:
			t.Fatal("Ready not signalled after a publish")
		}
		recs, err := s.TryNext(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sameRecords(t, recs, more)

		// An error is ready too.
		h.CloseThread("a")
		<-s.Ready()
		if _, err := s.TryNext(ctx); !errors.Is(err, ErrClosed) {
			t.Fatalf("TryNext: %v, want ErrClosed", err)
		}
	})
}

func TestNextWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, h := newTestLog(t, Options{})
		l.append("a", 1)
		s := h.Subscribe("a", last(l.all("a")))
		defer s.Close()
		var got []*tether.Record
		done := make(chan error)
		go func() {
			recs, err := s.Next(context.Background())
			got = recs
			done <- err
		}()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Next returned %v with nothing published", err)
		default:
		}
		more := l.append("a", 2)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		sameRecords(t, got, more)
	})
}

func TestNextCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, h := newTestLog(t, Options{})
		l.append("a", 1)
		s := h.Subscribe("a", last(l.all("a")))
		defer s.Close()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			_, err := s.Next(ctx)
			done <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Next: %v, want context.Canceled", err)
		}
		// The subscriber is still usable.
		more := l.append("a", 1)
		sameRecords(t, drain(t, s, last(more)), more)

		// A cancelled ctx also bounds a History read.
		c := h.Subscribe("b", tether.OffsetStart)
		defer c.Close()
		if _, err := c.Next(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Next in catch-up: %v, want context.Canceled", err)
		}
	})
}

func TestCloseWakesNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, h := newTestLog(t, Options{})
		l.append("a", 1)
		s := h.Subscribe("a", last(l.all("a")))
		done := make(chan error)
		go func() {
			_, err := s.Next(context.Background())
			done <- err
		}()
		synctest.Wait()
		s.Close()
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Fatalf("Next: %v, want ErrClosed", err)
		}
	})
}
