package main

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Kinds of run.
const (
	kindDemo = "demo" // the server's in-process demo agent
	kindExt  = "ext"  // an external worker of the soak
)

// world is what the soak's clients were told: acknowledged appends and
// runs, and what each SSE client received. The checks hold the log
// against it.
type world struct {
	mu        sync.Mutex
	acks      []*ack
	runs      map[string]*runInfo
	followers []*follower
	threads   []string

	// armed is the fault waiting for its moment: faultAppend or
	// faultCreate, "" when none.
	armed    atomic.Value
	killedBy chan string
	srv      *server

	stats stats
	bad   []string // violations seen by the traffic
}

type stats struct {
	appendsAcked, appendRetries, duplicates, createsAcked, createRetries atomic.Int64
	leaseLost, abandoned, cuts, resumes                                  atomic.Int64
}

// ack is one append answered 2xx: its events, by key (see keyOf), in
// order, and the offset of the last one when the answer gave it (200; a
// 204 duplicate does not).
type ack struct {
	thread, run string
	keys        []string
	next        string
	verified    bool
}

// runInfo is a run whose create was acknowledged.
type runInfo struct {
	id, thread, kind string
	created          time.Time
	abandoned        bool      // its worker left it on purpose: it must end worker_lost
	lost             bool      // its worker was told lease_lost
	expiry           time.Time // the latest lease expiry an answer granted
}

const (
	faultAppend = "after an acknowledged append"
	faultCreate = "after an acknowledged run create"
)

func newWorld(srv *server) *world {
	w := &world{runs: map[string]*runInfo{}, killedBy: make(chan string, 1), srv: srv}
	w.armed.Store("")
	return w
}

// fire kills the server if the fault armed is this one: called right
// after the acknowledgement, before anything else happens.
func (w *world) fire(fault string) {
	if w.armed.CompareAndSwap(fault, "") && w.srv.kill() {
		select {
		case w.killedBy <- fault:
		default:
		}
	}
}

func (w *world) addAck(a *ack) {
	w.mu.Lock()
	w.acks = append(w.acks, a)
	w.mu.Unlock()
	w.stats.appendsAcked.Add(1)
}

func (w *world) addRun(r *runInfo) {
	w.mu.Lock()
	if _, ok := w.runs[r.id]; !ok {
		w.runs[r.id] = r
	}
	w.mu.Unlock()
	w.stats.createsAcked.Add(1)
}

func (w *world) run(id string) *runInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.runs[id]
}

func (w *world) addFollower(f *follower) {
	w.mu.Lock()
	w.followers = append(w.followers, f)
	w.mu.Unlock()
}

// keyOf names an event of the soak's workers uniquely in the whole soak,
// so that an acknowledged event can be found in the log: text deltas
// carry a unique text, the rest are unique per run or message.
func keyOf(typ, runID, messageID, delta string) string {
	switch typ {
	case "text.delta":
		return "d:" + delta
	case "message.started":
		return "ms:" + messageID
	case "message.finished":
		return "mf:" + messageID
	case "run.finished":
		return "rf:" + runID
	case "run.created":
		return "rc:" + runID
	}
	return ""
}

func plural(n int64, one string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", one)
	}
	return fmt.Sprintf("%d %ss", n, one)
}
