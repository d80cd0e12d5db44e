package hub

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
)

func TestSubscribeFromRing(t *testing.T) {
	l, h := newTestLog(t, Options{})
	for i := 0; i < 10; i++ {
		l.append("a", 3)
	}
	for _, tc := range []struct {
		name string
		from int // index of the cursor in the log, -1: OffsetStart, -2: the tail
	}{
		{"start", -1},
		{"middle", 13},
		{"tail", -2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := l.all("a")
			after := tether.OffsetStart
			switch {
			case tc.from >= 0:
				after = log[tc.from].Offset
			case tc.from == -2:
				after = last(log)
			}
			s := h.Subscribe("a", after)
			defer s.Close()
			got, err := s.TryNext(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			sameRecords(t, got, l.after("a", after))
			if got, err := s.TryNext(context.Background()); got != nil || err != nil {
				t.Fatalf("TryNext at the tail = %d records, %v; want nothing", len(got), err)
			}
			more := l.append("a", 2)
			sameRecords(t, drain(t, s, last(more)), more)
		})
	}
	if n := l.readCount(); n != 0 {
		t.Fatalf("subscribing from the ring read History %d times", n)
	}
}

func TestCloseThread(t *testing.T) {
	l, h := newTestLog(t, Options{})
	l.append("a", 3)
	l.append("b", 3)
	s := h.Subscribe("a", tether.OffsetStart)
	defer s.Close()
	other := h.Subscribe("b", tether.OffsetStart)
	defer other.Close()
	h.CloseThread("a")
	h.CloseThread("nope")
	got, err := s.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, got, l.all("a")) // what was queued comes first
	if _, err := s.Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next: %v, want ErrClosed", err)
	}
	if st := h.Stats(); st.Topics != 1 || st.RingRecords != 3 || st.Subscribers != 1 {
		t.Fatalf("stats after CloseThread: %+v", st)
	}
	more := l.append("b", 1)
	sameRecords(t, drain(t, other, last(more)), l.all("b"))

	// The thread can be followed again (a new thread with the same ID).
	l.append("a", 1)
	s2 := h.Subscribe("a", tether.OffsetStart)
	defer s2.Close()
	sameRecords(t, drain(t, s2, last(l.all("a"))), l.all("a"))
}

// TestInterrupt: Interrupt ends every subscriber with its error, after
// what it had queued, and every new one until Resume (a Durable Streams
// follower subscribes to the hub directly: it must not wait on a node
// that hears nothing); it keeps the rings: a subscriber made after
// Resume resumes from the ring, reading no history.
func TestInterrupt(t *testing.T) {
	l, h := newTestLog(t, Options{})
	l.append("a", 3)
	l.append("b", 3)
	s := h.Subscribe("a", tether.OffsetStart)
	defer s.Close()
	other := h.Subscribe("b", last(l.all("b")))
	defer other.Close()
	reads := l.readCount()
	cause := errors.New("cut off")
	h.Interrupt(cause)
	got, err := s.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, got, l.all("a")) // what was queued comes first
	for _, s := range []*Subscriber{s, other} {
		if _, err := s.Next(context.Background()); !errors.Is(err, cause) {
			t.Fatalf("Next: %v, want the interruption's error", err)
		}
	}
	if st := h.Stats(); st.Topics != 2 || st.RingRecords != 6 || st.Subscribers != 0 {
		t.Fatalf("stats after Interrupt: %+v", st)
	}
	// Until Resume, a new subscriber ends at once with the same error.
	early := h.Subscribe("a", last(got))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := early.Next(ctx); !errors.Is(err, cause) {
		t.Fatalf("a subscriber made while interrupted: %v, want the interruption's error", err)
	}
	early.Close()
	h.Resume()
	more := l.append("a", 2)
	again := h.Subscribe("a", last(got))
	defer again.Close()
	sameRecords(t, drain(t, again, last(more)), more)
	if n := l.readCount(); n != reads {
		t.Fatalf("a subscriber after Interrupt read History %d times", n-reads)
	}
}

func TestClose(t *testing.T) {
	l, h := newTestLog(t, Options{})
	l.append("a", 3)
	s := h.Subscribe("a", last(l.all("a")))
	defer s.Close()
	catching := h.Subscribe("b", tether.OffsetStart)
	defer catching.Close()
	h.Close()
	h.Close()
	for _, s := range []*Subscriber{s, catching} {
		if _, err := s.Next(context.Background()); !errors.Is(err, ErrClosed) {
			t.Fatalf("Next: %v, want ErrClosed", err)
		}
	}
	l.append("a", 1) // ignored
	late := h.Subscribe("a", tether.OffsetStart)
	defer late.Close()
	if _, err := late.Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
	if st := h.Stats(); st != (Stats{}) {
		t.Fatalf("stats after Close: %+v", st)
	}
}

// DropIdle drops every topic without subscribers and its ring, and none
// that has some; a dropped thread is still served, from History.
func TestDropIdle(t *testing.T) {
	l, h := newTestLog(t, Options{})
	l.append("busy", 2)
	busy := h.Subscribe("busy", tether.OffsetStart)
	defer busy.Close()
	l.append("a", 3)
	l.append("b", 4)
	if n := h.DropIdle(); n != 2 {
		t.Fatalf("DropIdle = %d, want 2", n)
	}
	if st := h.Stats(); st.Topics != 1 || st.RingRecords != 2 || st.Subscribers != 1 {
		t.Fatalf("stats after DropIdle: %+v", st)
	}
	l.append("busy", 1)
	got, err := busy.TryNext(context.Background())
	if err != nil || len(got) != 3 {
		t.Fatalf("the busy thread's subscriber: %d records, %v", len(got), err)
	}
	s := h.Subscribe("b", tether.OffsetStart)
	defer s.Close()
	got, err = s.TryNext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, got, l.after("b", tether.OffsetStart))
}

func TestIdleEviction(t *testing.T) {
	l, h := newTestLog(t, Options{IdleTopics: 2})
	l.append("busy", 1)
	busy := h.Subscribe("busy", tether.OffsetStart)
	defer busy.Close()
	l.append("a", 1)
	l.append("b", 1)
	l.append("a", 1) // a is now more recent than b
	l.append("c", 1) // evicts b
	topics := func() []string {
		h.mu.Lock()
		defer h.mu.Unlock()
		var ids []string
		for _, id := range []string{"busy", "a", "b", "c", "d"} {
			if h.topics[id] != nil {
				ids = append(ids, id)
			}
		}
		return ids
	}
	if got := fmt.Sprint(topics()); got != "[busy a c]" {
		t.Fatalf("topics %s, want [busy a c]", got)
	}
	l.append("d", 1) // evicts a, never busy
	if got := fmt.Sprint(topics()); got != "[busy c d]" {
		t.Fatalf("topics %s, want [busy c d]", got)
	}
	if st := h.Stats(); st.Topics != 3 || st.RingRecords != 3 {
		t.Fatalf("stats: %+v", st)
	}
	// busy becomes idle: it is the least recently published, so it goes
	// at once.
	busy.Close()
	if got := fmt.Sprint(topics()); got != "[c d]" {
		t.Fatalf("topics %s, want [c d]", got)
	}
	l.append("c", 1)
	l.append("e", 1)
	if got := fmt.Sprint(topics()); got != "[c]" {
		t.Fatalf("topics %s, want [c] (and e)", got)
	}
	// An evicted thread is still served, from History.
	reads := l.readCount()
	s := h.Subscribe("a", tether.OffsetStart)
	defer s.Close()
	sameRecords(t, drain(t, s, last(l.all("a"))), l.all("a"))
	if l.readCount() == reads {
		t.Fatal("no History read for an evicted thread")
	}
}
