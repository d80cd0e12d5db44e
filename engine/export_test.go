package engine

// SetAfterResync makes update call f after each catch-up with other
// nodes' events, before it validates its plan again.
func SetAfterResync(e *Engine, f func()) { e.afterResync = f }
