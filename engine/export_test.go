package engine

// SetAfterResync makes update call f after each catch-up with other
// nodes' events, before it validates its plan again.
func SetAfterResync(e *Engine, f func()) { e.afterResync = f }

// SeenAgents returns how many agent names the engine remembers a claim for.
func SeenAgents(e *Engine) int {
	e.agentsMu.Lock()
	defer e.agentsMu.Unlock()
	return len(e.seen)
}

// QueuedPlans returns how many plans of a thread wait behind the commit
// in flight.
func QueuedPlans(e *Engine, threadID string) int {
	t := e.cached(threadID)
	if t == nil {
		return 0
	}
	t.wmu.Lock()
	defer t.wmu.Unlock()
	return len(t.queue)
}
