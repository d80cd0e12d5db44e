package engine

import (
	"slices"
	"sync"
)

// runQueue holds the runs that are ready to start (pending, first in line on
// their thread), by agent name, and wakes the workers waiting for them. It
// is a hint: a claim checks against the thread's state and skips entries
// that went stale.
//
// A claim for several agents takes the oldest entry of any of them (first
// in, first out across agents), so that a burst of one agent's runs does
// not starve another's behind the same in-process runner, and a run's place
// in line (position) means what it says.
type runQueue struct {
	mu     sync.Mutex
	runs   map[string][]queuedRun // agent → FIFO
	queued map[string]bool        // run ID → in runs
	wake   chan struct{}          // closed and replaced on every push
	seq    uint64                 // of the last entry added
	closed bool
}

type queuedRun struct {
	agent, runID, threadID string
	// reclaim marks a started run whose worker was lost, for another
	// worker of a resumable agent to take over.
	reclaim bool
	// seq orders entries across agents; an entry put back after a failed
	// claim keeps its own, and so its place.
	seq uint64
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
	l := q.runs[r.agent]
	if r.seq == 0 {
		q.seq++
		r.seq = q.seq
		l = append(l, r)
	} else {
		// Back in its place (entries are few behind a failed claim).
		i := len(l)
		for i > 0 && l[i-1].seq > r.seq {
			i--
		}
		l = append(l, queuedRun{})
		copy(l[i+1:], l[i:])
		l[i] = r
	}
	q.runs[r.agent] = l
	close(q.wake)
	q.wake = make(chan struct{})
}

// pop takes the oldest queued run of any of the agents. It also returns a
// channel that is closed on the next push, to wait on when there was
// nothing: taking both under one lock means no push is missed.
func (q *runQueue) pop(agents []string) (queuedRun, bool, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	best := ""
	for _, a := range agents {
		if l := q.runs[a]; len(l) > 0 && (best == "" || l[0].seq < q.runs[best][0].seq) {
			best = a
		}
	}
	if best == "" {
		return queuedRun{}, false, q.wake
	}
	l := q.runs[best]
	r := l[0]
	if len(l) == 1 {
		delete(q.runs, best)
	} else {
		l[0] = queuedRun{}
		q.runs[best] = l[1:]
	}
	delete(q.queued, r.runID)
	return r, true, q.wake
}

// remove takes a run out of line (it finished while queued). A run not
// queued costs a map lookup.
func (q *runQueue) remove(runID string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.queued[runID] {
		return
	}
	delete(q.queued, runID)
	for agent, l := range q.runs {
		i := slices.IndexFunc(l, func(r queuedRun) bool { return r.runID == runID })
		if i < 0 {
			continue
		}
		if len(l) == 1 {
			delete(q.runs, agent)
		} else {
			q.runs[agent] = slices.Delete(l, i, i+1)
		}
		return
	}
}

// removeThread takes every run of a thread out of line (the thread was
// deleted): its runs will never start, so they must not hold a place
// ahead of other runs nor count as queued.
func (q *runQueue) removeThread(threadID string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for agent, l := range q.runs {
		kept := slices.DeleteFunc(l, func(r queuedRun) bool {
			if r.threadID == threadID {
				delete(q.queued, r.runID)
				return true
			}
			return false
		})
		if len(kept) == 0 {
			delete(q.runs, agent)
		} else {
			q.runs[agent] = kept
		}
	}
}

// len returns the number of queued runs for an agent.
func (q *runQueue) len(agent string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.runs[agent])
}

// total returns the number of queued runs of every agent.
func (q *runQueue) total() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queued)
}

// position returns a queued run's place in line among the runs of the
// agents in line (1: the next to be claimed), or 0 if it is not queued.
// The line is that of the claims that serve these agents, oldest first.
func (q *runQueue) position(runID, agent string, line []string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.queued[runID] {
		return 0
	}
	var seq uint64
	for _, r := range q.runs[agent] {
		if r.runID == runID {
			seq = r.seq
			break
		}
	}
	if seq == 0 {
		return 0
	}
	n := 1
	for _, a := range line {
		for _, r := range q.runs[a] {
			if r.seq >= seq {
				break
			}
			n++
		}
	}
	return n
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

// QueuePosition returns a pending run's place in line on this node (1: the
// next to start), or 0 if it is not in line here: started or finished, behind
// an earlier run of its thread (multitask enqueue), or not known to this
// node. The runs of this node's in-process agents share one line, the
// runner's, whose concurrency bounds how many run at once; the runs of each
// other agent are in a line of their own, that of its workers' claims.
func (e *Engine) QueuePosition(agent, runID string) int {
	line := []string{agent}
	if slices.Contains(e.opts.InProcess, agent) {
		line = e.opts.InProcess
	}
	return e.queue.position(runID, agent, line)
}

// QueuedRuns returns how many runs are in line on this node, all agents
// together.
func (e *Engine) QueuedRuns() int { return e.queue.total() }
