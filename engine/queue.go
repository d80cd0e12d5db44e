package engine

import "sync"

// runQueue holds the runs that are ready to start (pending, first in line on
// their thread), by agent name, and wakes the workers waiting for them. It
// is a hint: a claim checks against the thread's state and skips entries
// that went stale.
type runQueue struct {
	mu     sync.Mutex
	runs   map[string][]queuedRun // agent → FIFO
	queued map[string]bool        // run ID → in runs
	wake   chan struct{}          // closed and replaced on every push
	closed bool
}

type queuedRun struct {
	agent, runID, threadID string
	// reclaim marks a started run whose worker was lost, for another
	// worker of a resumable agent to take over.
	reclaim bool
}

func newRunQueue() *runQueue {
	return &runQueue{runs: make(map[string][]queuedRun), queued: make(map[string]bool), wake: make(chan struct{})}
}

// push queues a run unless it is queued already.
func (q *runQueue) push(agent, runID, threadID string) {
	q.add(queuedRun{agent: agent, runID: runID, threadID: threadID})
}

// pushReclaim queues a started run whose lease expired.
func (q *runQueue) pushReclaim(agent, runID, threadID string) {
	q.add(queuedRun{agent: agent, runID: runID, threadID: threadID, reclaim: true})
}

func (q *runQueue) add(r queuedRun) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.queued[r.runID] {
		return
	}
	q.queued[r.runID] = true
	q.runs[r.agent] = append(q.runs[r.agent], r)
	close(q.wake)
	q.wake = make(chan struct{})
}

// pop takes the oldest queued run of the first agent that has one. It also
// returns a channel that is closed on the next push, to wait on when there
// was nothing: taking both under one lock means no push is missed.
func (q *runQueue) pop(agents []string) (queuedRun, bool, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, a := range agents {
		if l := q.runs[a]; len(l) > 0 {
			r := l[0]
			if len(l) == 1 {
				delete(q.runs, a)
			} else {
				q.runs[a] = l[1:]
			}
			delete(q.queued, r.runID)
			return r, true, q.wake
		}
	}
	return queuedRun{}, false, q.wake
}

// len returns the number of queued runs for an agent.
func (q *runQueue) len(agent string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.runs[agent])
}

func (q *runQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		close(q.wake)
	}
}

func (q *runQueue) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}
