package api

import (
	"sync"
	"time"
)

// beat is the one clock of a server's streams. Instead of a ticker and a
// timer per stream (near a kilobyte of an idle stream's memory), every
// stream waits on the current beat: a channel closed and replaced every
// period. On a beat a stream pings if a heartbeat has passed since its
// last ping and ends if its lifetime is over, so both are late by at most
// a period, which is a quarter of the shorter of the two.
type beat struct {
	period    time.Duration
	heartbeat time.Duration
	stop      <-chan struct{}
	start     sync.Once
	mu        sync.Mutex
	ch        chan struct{}
}

func newBeat(heartbeat, lifetime time.Duration, stop <-chan struct{}) *beat {
	return &beat{period: max(min(heartbeat, lifetime)/4, 10*time.Millisecond), heartbeat: heartbeat, stop: stop, ch: make(chan struct{})}
}

// pingDue reports whether a stream that last pinged at *last is due a ping
// at now: a heartbeat after the last, give or take half a beat. If it is,
// *last becomes now.
func (b *beat) pingDue(last *time.Time, now time.Time) bool {
	if now.Sub(*last) < b.heartbeat-b.period/2 {
		return false
	}
	*last = now
	return true
}

// next returns the channel closed at the next beat (or at shutdown). The
// clock starts with the first stream.
func (b *beat) next() <-chan struct{} {
	b.start.Do(func() { go b.run() })
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

func (b *beat) run() {
	t := time.NewTicker(b.period)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			b.mu.Lock()
			close(b.ch)
			b.ch = make(chan struct{})
			b.mu.Unlock()
		}
	}
}
