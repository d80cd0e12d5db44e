package hub

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
)

const endType = "test.end"

// milestones lets goroutines wait until the log has grown to a size, so
// that subscribers start and stall at points spread over the appends
// without timing assumptions.
type milestones struct {
	step int
	chs  []chan struct{}
	done chan struct{} // closed when appends end
	n    atomic.Int64
}

func newMilestones(total, step int) *milestones {
	m := &milestones{step: step, done: make(chan struct{})}
	for range total/step + 1 {
		m.chs = append(m.chs, make(chan struct{}))
	}
	return m
}

// add counts n appended records.
func (m *milestones) add(n int) {
	after := m.n.Add(int64(n))
	for k := int(after-int64(n))/m.step + 1; k <= int(after)/m.step && k < len(m.chs); k++ {
		close(m.chs[k])
	}
}

// wait returns once the log holds about n records, or appends have ended.
func (m *milestones) wait(n int) {
	k := n / m.step
	if k <= 0 {
		return
	}
	if k >= len(m.chs) {
		<-m.done
		return
	}
	select {
	case <-m.chs[k]:
	case <-m.done:
	}
}

// TestRaceHandover races many appenders against many subscribers that
// start at random cursors (OffsetStart, offsets older than the ring, in the
// ring, the tail) at random points of the appends; some are slow and get
// cut, some reconnect on their own; all resume from Offset(). Each must see
// exactly the log after its first cursor: no gap, no duplicate, in order.
func TestRaceHandover(t *testing.T) {
	t.Run("in order", func(t *testing.T) { testRaceHandover(t, false) })
	// A gap in what the hub is fed (a batch committed and never published)
	// must not reach subscribers: they fetch the batch from History.
	t.Run("gaps", func(t *testing.T) { testRaceHandover(t, true) })
}

func testRaceHandover(t *testing.T, gaps bool) {
	const (
		threads     = 4
		appenders   = 50
		batches     = 100 // per appender
		subscribers = 200
	)
	l, h := newTestLog(t, Options{RingSize: 32, HistoryPage: 64, BufferEvents: 128, IdleTopics: 1})
	total := appenders * batches * 3 // about: batches of 1 to 5 records
	l.yield.Store(4)
	if gaps {
		l.skip.Store(8)
	}
	ms := newMilestones(total, 25)
	l.readHook = func(string) { // let appends overtake reads
		switch rand.IntN(8) {
		case 0:
			ms.wait(int(ms.n.Load()) + 2*ms.step)
		case 1, 2, 3:
			runtime.Gosched()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	thread := func(i int) string { return fmt.Sprintf("t%d", i) }
	var appending, started, subscribing sync.WaitGroup
	for a := range appenders {
		appending.Go(func() {
			r := rand.New(rand.NewPCG(uint64(a), 1))
			for range batches {
				n := 1 + r.IntN(5)
				l.append(thread(r.IntN(threads)), n)
				ms.add(n)
			}
		})
	}

	var cuts, reconnects, catchups atomic.Int64
	type result struct {
		thread string
		from   tether.Offset
		got    []*tether.Record
		err    error
	}
	results := make([]result, subscribers)
	for i := range subscribers {
		started.Add(1)
		subscribing.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 2))
			res := &results[i]
			res.thread = thread(r.IntN(threads))
			slow := i%5 == 0
			selecting := i%3 == 0 // Ready and TryNext instead of Next
			ms.wait(r.IntN(total))

			log := l.all(res.thread)
			res.from = tether.OffsetStart
			switch k := r.IntN(4); {
			case k == 0 || len(log) == 0:
			case k == 1:
				res.from = log[len(log)-1].Offset
			default:
				res.from = log[r.IntN(len(log))].Offset
			}
			s := h.Subscribe(res.thread, res.from)
			started.Done()
			defer func() { s.Close() }()
			s.mu.Lock()
			if s.catchup {
				catchups.Add(1)
			}
			s.mu.Unlock()
			for {
				var recs []*tether.Record
				var err error
				if selecting {
					select {
					case <-s.Ready():
						recs, err = s.TryNext(ctx)
					case <-ctx.Done():
						err = ctx.Err()
					}
				} else {
					recs, err = s.Next(ctx)
				}
				if errors.Is(err, ErrSlow) {
					cuts.Add(1)
					s.Close()
					s = h.Subscribe(res.thread, s.Offset())
					continue
				}
				if err != nil {
					res.err = err
					return
				}
				res.got = append(res.got, recs...)
				if len(recs) > 0 && recs[len(recs)-1].Type == endType {
					return
				}
				switch {
				case slow && r.IntN(4) == 0:
					ms.wait(int(ms.n.Load()) + 800) // stall while others append
				case r.IntN(50) == 0:
					reconnects.Add(1)
					s.Close()
					s = h.Subscribe(res.thread, s.Offset())
				}
			}
		})
	}

	appending.Wait()
	close(ms.done)
	started.Wait()
	for i := range threads { // the end of each log
		l.mu.Lock()
		before, recs := l.commitLocked(thread(i), 1)
		recs[0].Type = endType
		l.pubMu.Lock()
		l.mu.Unlock()
		h.Publish(thread(i), before, recs)
		l.pubMu.Unlock()
	}
	subscribing.Wait()

	for i, res := range results {
		if res.err != nil {
			t.Errorf("subscriber %d: %v", i, res.err)
			continue
		}
		want := l.after(res.thread, res.from)
		if err := compare(res.got, want); err != nil {
			t.Errorf("subscriber %d on %s from %s: %v", i, res.thread, res.from, err)
		}
	}
	t.Logf("%d records in %d threads; %d subscribers (%d started in catch-up), %d cuts, %d reconnects",
		ms.n.Load(), threads, subscribers, catchups.Load(), cuts.Load(), reconnects.Load())
	if !gaps && cuts.Load() == 0 {
		t.Error("no subscriber was cut: the test does not exercise ErrSlow")
	}
}

// compare explains how got differs from want.
func compare(got, want []*tether.Record) error {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Errorf("record %d is %s, want %s", i, got[i].Offset, want[i].Offset)
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("got %d records (%s), want %d (%s)", len(got), span(got), len(want), span(want))
	}
	return nil
}
