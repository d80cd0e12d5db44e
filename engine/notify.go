package engine

import (
	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// onCommit receives every committed batch from the store, in commit order:
// it folds the events into the thread's committed state, publishes them,
// and queues runs that became ready to start.
func (e *Engine) onCommit(c *store.Committed) {
	if c.Deleted {
		e.deletedElsewhere(c)
		return
	}
	t := e.entry(c.ThreadID)
	var next []tether.Run
	if t != nil {
		t.rmu.Lock()
		if t.state == nil {
			// Still loading: the load folds it when it is done.
			t.early = append(t.early, c)
			t.rmu.Unlock()
			t = nil
		}
	}
	if t != nil {
		bytes := 0
		for i, ev := range c.Events {
			e.fold(t, ev)
			bytes += len(c.Records[i].Data)
		}
		e.noteFolded(t, bytes)
		for _, ev := range c.Events {
			if ev.Type == tether.EventRunCreated || ev.Type == tether.EventRunFinished {
				if r, ok := t.state.Machine().NextPending(); ok {
					next = append(next, r)
				}
				break
			}
		}
		t.rmu.Unlock()
	}
	e.hub.Publish(c.ThreadID, c.Before, c.Records)
	for _, ev := range c.Events {
		if ev.Type == tether.EventRunFinished || ev.Type == tether.EventRunStarted {
			// A pending run cancelled, a lost worker's run aborted
			// before its reclaim, or a run claimed through another node
			// (this one queued it when it heard of it): out of line at
			// once, so that the runs behind it move up and it is no
			// longer counted as queued.
			e.queue.remove(ev.RunID)
		}
	}
	for _, r := range next {
		e.queue.push(r.Agent, r.ID, r.ThreadID)
	}
	if t == nil {
		e.dispatchUncached(c)
	}
}
