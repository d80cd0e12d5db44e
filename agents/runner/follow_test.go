package runner_test

import (
	"context"
	"fmt"
	"testing"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/engine"
)

// An agent that emits faster than its runner's follower of the run reads
// (here: a follower's buffer of 2 events, and batches of 10) goes on to
// its end: the follower, cut as too slow, follows again from where it
// was. It stopped the agent as if the run had ended, and the run, never
// finished, waited for its lease to run out and ended aborted.
func TestFastAgentOutrunsItsFollower(t *testing.T) {
	var opts engine.Options
	opts.Hub.BufferEvents = 2
	fast := agents.Func(func(ctx context.Context, s *agents.Session) error {
		if err := s.Emit(ctx, &tether.Event{Type: tether.EventMessageStarted, MessageID: "m1", Role: tether.RoleAssistant}); err != nil {
			return err
		}
		for i := range 100 {
			evs := make([]*tether.Event, 10)
			for j := range evs {
				evs[j] = &tether.Event{Type: tether.EventTextDelta, MessageID: "m1", Delta: fmt.Sprintf("%d.%d ", i, j)}
			}
			if err := s.Emit(ctx, evs...); err != nil {
				return err
			}
		}
		return nil
	})
	e, _ := world(t, map[string]agents.Agent{"fast": fast}, opts)
	run := start(t, e, "fast", `{}`)
	waitStatus(t, e, run.ID, tether.RunDone)
}
