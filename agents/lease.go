package agents

import (
	"sync"
	"time"
)

// LeaseClock is what a run's transport knows of its lease: when the last
// request that renewed it (an append, a heartbeat) was sent. A transport
// retrying through an outage gives up when the lease has certainly
// expired: two TTLs after that (one TTL is the lease; the second covers
// renewals whose outcome was unknown, which the server can only have
// made while the lease held).
type LeaseClock struct {
	mu      sync.Mutex
	renewed time.Time
}

// NewLeaseClock returns the clock of a lease renewed at at (its claim).
func NewLeaseClock(at time.Time) *LeaseClock { return &LeaseClock{renewed: at} }

// Renew notes a renewal by a request sent at at; an earlier one than the
// last noted changes nothing.
func (c *LeaseClock) Renew(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if at.After(c.renewed) {
		c.renewed = at
	}
}

// Last returns when the last renewal was sent.
func (c *LeaseClock) Last() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.renewed
}

// Expired reports whether a lease of ttl has certainly expired by now.
func (c *LeaseClock) Expired(ttl time.Duration) bool {
	return time.Since(c.Last()) > 2*ttl
}
