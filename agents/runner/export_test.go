package runner

import "time"

// SetStopWait shortens how long Shutdown waits for agents that ignore
// their context.
func SetStopWait(d time.Duration) func() {
	old := stopWait
	stopWait = d
	return func() { stopWait = old }
}
