package wake_test

import (
	"context"
	"testing"
	"time"

	"github.com/tetherhq/tether/streams/wake"
)

// A lease timer that fires as Close runs (too late for Close to stop it)
// starts nothing once Close has begun: before, it ended the wake and
// started the next, writing the subscription to the store and a wake event
// to the wake stream after Close had returned (and, for a webhook, adding
// a delivery to the WaitGroup Close waits on).
func TestLeaseTimerAtCloseStartsNothing(t *testing.T) {
	e := newEnv(t)
	e.write("wake/pool", `[]`)
	if _, _, err := e.m.Create("p", wake.CreateRequest{Type: wake.TypePullWake, Pattern: "events/*", WakeStream: "wake/pool", LeaseTTL: wake.MinLeaseTTL}); err != nil {
		t.Fatal(err)
	}
	fired, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	wake.HoldTimers(t.Cleanup, func() { close(fired); <-release }, func() { close(done) })
	e.write("events/a", `{"n":1}`)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, err := e.m.Claim("p", "w1")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no wake to claim: %v", err)
		}
	}
	<-fired // the lease ran out; its timer waits to take the manager's lock
	e.m.Close()
	close(release)
	<-done
	res, err := e.svc.Read(context.Background(), "wake/pool", "-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 1 {
		t.Fatalf("%d wake events, want the one before Close: %q", len(res.Items), res.Items)
	}
}
