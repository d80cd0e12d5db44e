package agents

import (
	"context"
	"fmt"
	"runtime/debug"

	tether "github.com/tetherhq/tether"
)

// Call runs a on s, turning a panic into an error, so that one broken
// agent cannot take its worker (or the server) down.
func Call(ctx context.Context, a Agent, s *Session) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("agent panicked: %v\n%s", v, debug.Stack())
		}
	}()
	if a == nil {
		return fmt.Errorf("no agent %q", s.Run.Agent)
	}
	return a.Run(ctx, s)
}

// AgentErrorCode is the code of a run whose agent failed. Clients see a
// generic message; the agent's error is for the worker's log only, as it
// may hold provider responses or secrets.
const AgentErrorCode = "agent_error"

// Conclude finishes the run after its agent returned agentErr, unless the
// agent finished it: cancelled if a cancel was requested, error
// (AgentErrorCode) if the agent failed, else done.
//
// A cancel may be requested after the worker last looked; the server then
// refuses any end but cancelled (conflict), and Conclude ends the run
// cancelled, so the run does not wait out the server's cancel grace.
func (s *Session) Conclude(ctx context.Context, agentErr error, cancelRequested bool) error {
	var err error
	switch {
	case s.finished:
		return nil
	case cancelRequested:
		return s.Finish(ctx, tether.RunCancelled, nil)
	case agentErr != nil:
		err = s.Finish(ctx, tether.RunError, &tether.ErrorInfo{Code: AgentErrorCode, Message: "The agent failed."})
	default:
		err = s.Finish(ctx, tether.RunDone, nil)
	}
	if tether.CodeOf(err) == tether.CodeConflict {
		// Refused, so certainly not in the log: the run is still open.
		if s.Finish(ctx, tether.RunCancelled, nil) == nil {
			return nil
		}
	}
	return err
}
