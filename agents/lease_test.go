package agents_test

import (
	"testing"
	"time"

	"github.com/tetherhq/tether/agents"
)

// A lease is certainly expired two TTLs after its last renewal; a late
// answer to an older request does not move the renewal back.
func TestLeaseClock(t *testing.T) {
	start := time.Now().Add(-time.Minute)
	c := agents.NewLeaseClock(start)
	if !c.Expired(20*time.Second) || c.Expired(time.Minute) {
		t.Fatalf("renewed a minute ago: expired at 20 s %v, at 1 min %v", c.Expired(20*time.Second), c.Expired(time.Minute))
	}
	now := time.Now()
	c.Renew(now)
	c.Renew(start) // an older request's answer, come late
	if got := c.Last(); !got.Equal(now) || c.Expired(time.Second) {
		t.Fatalf("last %v, want %v; expired %v", got, now, c.Expired(time.Second))
	}
}
