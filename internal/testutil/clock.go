package testutil

import (
	"sync"
	"time"
)

// Clock is a clock that moves only when a test advances it, for tests of
// leases, graces and windows: give its Now to engine.Options.Now and the
// test decides when a lease has expired, instead of racing a short real
// TTL on a loaded machine. The sweeper still runs on real ticks; it only
// reads the time from the clock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock set to the current time.
func NewClock() *Clock { return &Clock{now: time.Now().UTC().Truncate(time.Millisecond)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
