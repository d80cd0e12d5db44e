package engine

import (
	"container/list"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/hub"
	"github.com/tetherhq/tether/internal/clip"
	"github.com/tetherhq/tether/store"
)

// Options configure an Engine. The zero value is ready to use.
type Options struct {
	// NodeID names this node. Runs that its in-process agents hold carry it
	// in their lease, so that the node can abort them when it restarts.
	// Defaults to "local".
	NodeID string
	// LeaseTTL is how long a run's lease lasts without an append or a
	// heartbeat. Defaults to 30s.
	LeaseTTL time.Duration
	// SweepInterval is how often expired leases and cancel graces are
	// checked. Defaults to 1s.
	SweepInterval time.Duration
	// CancelGrace is how long a worker has to confirm a cancel before the
	// server ends the run cancelled. Defaults to 10s.
	CancelGrace time.Duration
	// ResumeWindow is how long a run of a resumable agent whose lease
	// expired waits for another worker to reclaim it before it is
	// aborted. Defaults to 10m.
	ResumeWindow time.Duration
	// MaxEventBytes limits the encoded size of one event. Defaults to 1 MiB.
	MaxEventBytes int
	// MaxThreads is how many thread states are kept in memory; idle ones
	// beyond it are dropped and folded again from the log when needed.
	// Defaults to 10,000.
	MaxThreads int
	// CheckpointEvents is how many events a thread grows by before its
	// state is checkpointed in the store, so that loading it folds only
	// the log after the checkpoint (its log must also have grown by the
	// last checkpoint's size). Defaults to 1,000; negative disables
	// checkpoints (loads still read existing ones).
	CheckpointEvents int
	// CheckpointMaxBytes is the largest checkpoint written: a thread whose
	// state encodes larger is loaded from the last checkpoint it had and
	// the log after it. Defaults to 64 MiB.
	CheckpointMaxBytes int
	// AcceptAgent reports whether runs may be created for an agent name
	// (in-process agents, and names configured for remote workers). Names
	// that a worker asked for in the last ten minutes are accepted too, and
	// so are Declared names and those declared with DeclareAgent.
	// Defaults to accepting every name.
	AcceptAgent func(name string) bool
	// InProcess names the agents this node runs itself, for Agents to
	// list. Defaults to none.
	InProcess []string
	// Declared are agent names the server's configuration declares
	// (tether serve --agents): runs of them are always accepted, and
	// RemoveAgent cannot remove them. Defaults to none.
	Declared []string
	// Hub configures the fan-out.
	Hub hub.Options
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
}

func (o *Options) setDefaults() {
	if o.NodeID == "" {
		o.NodeID = "local"
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 30 * time.Second
	}
	if o.SweepInterval <= 0 {
		o.SweepInterval = time.Second
	}
	if o.CancelGrace <= 0 {
		o.CancelGrace = 10 * time.Second
	}
	if o.ResumeWindow <= 0 {
		o.ResumeWindow = 10 * time.Minute
	}
	if o.MaxEventBytes <= 0 {
		o.MaxEventBytes = 1 << 20
	}
	if o.MaxThreads <= 0 {
		o.MaxThreads = 10000
	}
	if o.CheckpointEvents == 0 {
		o.CheckpointEvents = 1000
	}
	if o.CheckpointMaxBytes <= 0 {
		o.CheckpointMaxBytes = 64 << 20
	}
	if o.AcceptAgent == nil {
		o.AcceptAgent = func(string) bool { return true }
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Engine validates, commits and publishes the events of every thread, and
// serves subscriptions. Create one with New.
type Engine struct {
	st   store.Store
	hub  *hub.Hub
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	threads map[string]*thread
	lru     *list.List        // of *thread, most recently used first
	runs    map[string]string // run ID → thread ID, for the runs of the threads in memory
	// deleting counts the deletes in flight by thread ID: while one is,
	// the thread is not loaded (it is not_found).
	deleting map[string]int
	// delDone is closed, and replaced, each time a delete ends, for the
	// creates that wait for one (afterDeletes). Guarded by mu.
	delDone chan struct{}
	// deletes counts the deletes of threads (here and by other nodes) by a
	// hash of their ID (resume.go).
	deletes [64]atomic.Uint64

	queue *runQueue
	// ckptQueue holds the threads due for a checkpoint (checkpoint.go).
	ckptQueue chan *thread

	agentsMu sync.Mutex
	seen     map[string]time.Time // agent name → when a worker last asked for it
	pruned   time.Time            // when names older than seenWindow last left seen and shared (every quarter of it)
	shared   map[string]time.Time // agent name → when this node last told the store's directory
	declared map[string]time.Time // agent name → when this node last read its declaration (agents.go)

	// feedLost is closed while the store cannot follow its log, and
	// replaced by an open one when it follows it again (feed.go).
	feedLost atomic.Pointer[chan struct{}]
	started  atomic.Bool
	closing  chan struct{}
	closed   atomic.Bool
	bg       sync.WaitGroup
	counters Counters

	// afterResync, if set (tests only), is called by update after each
	// catch-up with other nodes' events, before the plan is validated
	// again.
	afterResync func()
}

// New returns an engine over st. It takes over st's notify function.
func New(st store.Store, opts Options) *Engine {
	opts.setDefaults()
	e := &Engine{
		st:        st,
		opts:      opts,
		log:       opts.Logger,
		threads:   make(map[string]*thread),
		lru:       list.New(),
		runs:      make(map[string]string),
		deleting:  make(map[string]int),
		delDone:   make(chan struct{}),
		queue:     newRunQueue(),
		ckptQueue: make(chan *thread, 256),
		seen:      make(map[string]time.Time),
		shared:    make(map[string]time.Time),
		declared:  make(map[string]time.Time),
		closing:   make(chan struct{}),
	}
	e.hub = hub.New(st.ReadPage, opts.Hub)
	lost := make(chan struct{})
	e.feedLost.Store(&lost)
	st.SetNotify(e.onCommit)
	if f, ok := st.(store.Feed); ok {
		f.SetFeedNotify(e.feedChanged)
	}
	return e
}

// Start finishes what a previous process left behind (in-process runs of
// this node and runs whose lease expired are aborted; pending runs are
// queued for their agents) and starts the sweeper. It returns once the
// recovery is committed.
func (e *Engine) Start(ctx context.Context) error {
	if !e.started.CompareAndSwap(false, true) {
		return errors.New("engine: already started")
	}
	if err := e.recover(ctx); err != nil {
		return err
	}
	e.bg.Add(2)
	go e.sweepLoop()
	go e.checkpointLoop()
	return nil
}

// Close stops the sweeper, ends every subscription and waits for batches in
// flight. It does not close the store.
func (e *Engine) Close() error {
	if !e.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(e.closing)
	e.queue.close()
	e.bg.Wait()
	e.hub.Close()
	e.mu.Lock()
	ts := make([]*thread, 0, len(e.threads))
	for _, t := range e.threads {
		ts = append(ts, t)
	}
	e.mu.Unlock()
	for _, t := range ts {
		t.waitIdle()
	}
	return nil
}

// Hub returns the engine's hub (for its statistics).
func (e *Engine) Hub() *hub.Hub { return e.hub }

// Store returns the store the engine commits to.
func (e *Engine) Store() store.Store { return e.st }

// NodeID returns the node's ID.
func (e *Engine) NodeID() string { return e.opts.NodeID }

// LeaseTTL returns the lease duration.
func (e *Engine) LeaseTTL() time.Duration { return e.opts.LeaseTTL }

func (e *Engine) now() tether.Time { return tether.At(e.opts.Now()) }

// seenWindow is how long a worker's claim keeps its agent names known.
const seenWindow = 10 * time.Minute

// KnownAgent reports whether runs may be created for an agent: it is
// accepted by Options.AcceptAgent, it is declared (Options.Declared,
// DeclareAgent), or a worker asked for it recently, on this node or, on a
// store shared by several nodes, on any node.
func (e *Engine) KnownAgent(ctx context.Context, name string) bool {
	if name == "" {
		return false
	}
	if e.opts.AcceptAgent(name) || e.isDeclared(ctx, name) {
		return true
	}
	now := e.opts.Now()
	e.agentsMu.Lock()
	at, ok := e.seen[name]
	e.agentsMu.Unlock()
	if ok && now.Sub(at) < seenWindow {
		return true
	}
	dir, ok := e.st.(store.AgentDirectory)
	if !ok {
		return false
	}
	at, err := dir.AgentSeenAt(ctx, name)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			e.log.Warn("read the agent directory", "agent", clip.ID(name), "err", err)
		}
		return false
	}
	if now.Sub(at) >= seenWindow {
		return false
	}
	e.agentsMu.Lock()
	if at.After(e.seen[name]) {
		e.seen[name] = at
	}
	e.agentsMu.Unlock()
	return true
}

// sawAgents records that a worker asked for runs of these agents. On a
// store shared by several nodes it also tells the store's directory, at
// most every quarter of seenWindow per name, before the claim waits: once
// a worker's claim is in, every node accepts runs of its agents.
func (e *Engine) sawAgents(ctx context.Context, names []string) {
	now := e.opts.Now()
	var tell []string
	dir, shared := e.st.(store.AgentDirectory)
	e.agentsMu.Lock()
	if now.Sub(e.pruned) >= seenWindow/4 {
		// A name nobody asked for in seenWindow is known no more: keep
		// the maps to the names of recent claims, however many names
		// workers come and go with.
		e.pruned = now
		for n, at := range e.seen {
			if now.Sub(at) >= seenWindow {
				delete(e.seen, n)
			}
		}
		for n, at := range e.shared {
			if now.Sub(at) >= seenWindow {
				delete(e.shared, n)
			}
		}
	}
	for _, n := range names {
		e.seen[n] = now
		if shared && now.Sub(e.shared[n]) >= seenWindow/4 {
			e.shared[n] = now
			tell = append(tell, n)
		}
	}
	e.agentsMu.Unlock()
	if len(tell) == 0 {
		return
	}
	if err := dir.SawAgents(ctx, tell, now); err != nil {
		// Not fatal to the claim: this node knows the names; the next
		// claim tries again.
		e.log.Warn("record agents in the directory", "agents", tell, "err", err)
		e.agentsMu.Lock()
		for _, n := range tell {
			delete(e.shared, n)
		}
		e.agentsMu.Unlock()
	}
}

// Counters are running totals, for metrics.
type Counters struct {
	Events        atomic.Int64 // events committed
	Batches       atomic.Int64 // store batches committed
	Appends       atomic.Int64 // plans committed
	Rejected      atomic.Int64 // plans rejected by validation
	CommitErrors  atomic.Int64 // batches the store failed
	Subscriptions atomic.Int64 // subscriptions open now
	Aborted       atomic.Int64 // runs aborted by the server
	Checkpoints   atomic.Int64 // thread states checkpointed in the store
	// RecoveryErrors counts the runs that startup recovery could not
	// finish because their thread could not be loaded (Start).
	RecoveryErrors atomic.Int64
}

// Counters returns the engine's running totals.
func (e *Engine) Counters() *Counters { return &e.counters }

// CachedThreads returns how many thread states are in memory.
func (e *Engine) CachedThreads() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.threads)
}
