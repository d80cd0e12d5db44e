// Package store defines the durable home of Tether's data: one append-only
// event log per thread, plus the metadata of threads and runs (with their
// leases and idempotency keys), changed atomically with the log.
//
// The engine is the only caller. It validates events against the state
// machine (package runs) and hands the store a [Batch]: the events of one
// thread and the rows they change. The store assigns offsets, commits the
// batch in one transaction (many concurrent batches may share one
// transaction and one fsync: group commit), then reports the committed
// records, in commit order, to the function set with SetNotify, before the
// Commit call returns. Readers therefore only ever see committed events.
//
// Implementations: sqlitestore (embedded, the default). Every implementation
// passes the conformance suite in store/storetest.
//
// # Caveats
//
// A Batch carries a precondition, Version: the number of events the thread
// must hold before it. This is what makes pipelined appends safe (a batch
// validated on top of one that then failed fails too) and what lets several
// nodes share a store with optimistic concurrency.
package store

import (
	"context"
	"strings"
	"time"

	tether "github.com/tetherhq/tether"
)

// Delivery is what a store whose commits return only once this node has
// read them back from a shared log (natsstore) tells of that wait. A node
// whose reader of the log stalls holds its commits; these figures, served as
// metrics, show it before requests time out.
type Delivery interface {
	// AwaitingDelivery is the number of commits stored and waiting to be
	// read back.
	AwaitingDelivery() int64
	// LateDeliveries counts the commits that waited longer than the
	// store's timeout.
	LateDeliveries() int64
}

// Feed is implemented by stores whose notifications come from a shared log
// that this node follows (natsstore) and can stop following: cut off from
// the log, the node hears of no commit, another node's or its own, and
// what it serves from memory falls behind without a sign.
type Feed interface {
	// SetFeedNotify sets the function called with Following false once
	// the node has not been able to follow the log for the store's request
	// timeout, and with Following true once it follows it again. Calls are
	// in order, never concurrent, and only on a change.
	SetFeedNotify(fn func(FeedState))
}

// FeedState is what a Feed reports of the node's feed of the log.
type FeedState struct {
	// Following says whether the node follows the log.
	Following bool
	// Forget, with Following, says the node was cut off from the log for
	// so long that the log may no longer hold all it missed (natsstore: a
	// deleted thread's tombstone, kept for a day): it may not have heard
	// of a deletion, so what it holds in memory of threads must be read
	// from the store again.
	Forget bool
}

// Store is a durable set of thread logs and their metadata. All methods are
// safe for concurrent use.
type Store interface {
	// Commit applies b atomically: all of its events are appended and all
	// of its rows written, or nothing is. It assigns each event its offset
	// (setting Event.Offset) and returns the committed records in order.
	//
	// Before Commit returns successfully, the records have been passed to
	// the notify function. Commit returns ErrNotFound if the thread does not
	// exist (and b.Create is false), ErrExists if b.Create is set and the
	// thread exists or a run's idempotency key is taken, and ErrConflict if
	// the thread does not hold exactly b.Version events. If ctx ends before
	// the batch is committed, Commit returns ctx.Err() and the batch may or
	// may not have been committed.
	Commit(ctx context.Context, b *Batch) (*Result, error)

	// ReadEvents returns up to limit records of the thread's log that come
	// after offset after (tether.OffsetStart: from the first event), in
	// order. It returns ErrNotFound if the thread does not exist and
	// ErrOffsetNotFound if after is neither OffsetStart nor the offset of an
	// event of this thread. Its cost grows with the number of events
	// returned, not with the length of the log.
	ReadEvents(ctx context.Context, threadID string, after tether.Offset, limit int) ([]*tether.Record, error)

	// ReadPage is ReadEvents bounded in bytes as well as in records, for a
	// reader that holds what it reads until a client has taken it (a
	// subscriber catching up): it returns up to limit records and, past
	// the first, no more than maxBytes bytes of them (the sum of
	// Record.Size); the first comes whole whatever its size. maxBytes of
	// zero or less sets no byte limit. A page may therefore end well short
	// of limit with the log going on, so a short page does not mean the
	// end: more is false only when the page reached the end of the log as
	// it was read, and true when it stopped at either limit (it may be
	// true with nothing after, when the page ended exactly at the end; the
	// next read then returns no records and more false). A limit of zero or
	// less returns no records and more true, after the checks of
	// ReadEvents, whose errors it returns.
	ReadPage(ctx context.Context, threadID string, after tether.Offset, limit, maxBytes int) (recs []*tether.Record, more bool, err error)

	// Thread returns a thread's row and version. It returns ErrNotFound if
	// the thread does not exist.
	Thread(ctx context.Context, id string) (*ThreadRecord, error)

	// LoadThread reads what loading a thread takes, as of one state of the
	// store: the thread's row and version, its latest checkpoint, and up to
	// limit records of its log after the checkpoint's offset (from the
	// first event without one; none if limit is zero or less). Nothing of
	// another incarnation of the thread (one deleted since, or created
	// again after a delete) is mixed in: the checkpoint is left out unless
	// its offset names an event of the row's log, and the records are of
	// that log. The caller reads the rest of the log with ReadEvents after
	// the last record, which answers ErrOffsetNotFound or ErrNotFound once
	// that incarnation is gone, never another incarnation's events. It
	// returns ErrNotFound if the thread does not exist. Its cost grows with
	// the checkpoint's size and the records returned, not with the log's
	// length.
	LoadThread(ctx context.Context, id string, limit int) (*ThreadLoad, error)

	// Threads lists threads, most recently updated first.
	Threads(ctx context.Context, q ThreadQuery) (*ThreadPage, error)

	// DeleteThread removes a thread, its log, its runs, its producers and
	// its checkpoint.
	// It returns ErrNotFound if the thread does not exist.
	DeleteThread(ctx context.Context, id string) error

	// Run returns a run's row. It returns ErrNotFound if there is none.
	Run(ctx context.Context, id string) (*RunRecord, error)

	// RunByKey returns the run of a thread created with an idempotency key.
	// It returns ErrNotFound if there is none.
	RunByKey(ctx context.Context, threadID, key string) (*RunRecord, error)

	// ActiveRuns returns every run that is not terminal (pending, running or
	// waiting), oldest first.
	ActiveRuns(ctx context.Context) ([]*RunRecord, error)

	// Producer returns the state of an idempotent producer of a thread. It
	// returns ErrNotFound if the producer has never appended (or the
	// thread does not exist).
	Producer(ctx context.Context, threadID, key string) (*Producer, error)

	// SaveCheckpoint stores the state of a thread as of offset (an opaque
	// encoding made by the caller), replacing an older checkpoint. A
	// checkpoint is a cache of the fold of the log up to offset, so it may
	// be written at any time after the events it covers are committed; one
	// written late, after the thread was deleted and created again, is
	// never returned by LoadThread, whose log does not hold its offset. It
	// returns ErrNotFound if the thread does not exist.
	SaveCheckpoint(ctx context.Context, threadID string, offset tether.Offset, data []byte) error

	// Checkpoint returns the latest checkpoint of a thread. It returns
	// ErrNotFound if the thread or its checkpoint does not exist.
	Checkpoint(ctx context.Context, threadID string) (offset tether.Offset, data []byte, err error)

	// SetNotify sets the function that receives every committed batch that
	// has events, in commit order, before Commit returns to its caller. The
	// function must be quick and must not call the store. It replaces any
	// earlier function; nil removes it.
	SetNotify(fn func(*Committed))

	// Close waits for batches in flight, then releases the store. Calls
	// after Close return ErrClosed.
	Close() error
}

// Batch is one atomic change to one thread.
type Batch struct {
	ThreadID string
	// Create creates the thread; Thread must be set. The new thread has
	// version 0 before the events of the batch.
	Create bool
	// Version is the number of events the thread must hold before the
	// batch (ignored with Create).
	Version int64
	// Events are appended in order; the store sets their Offset.
	Events []*tether.Event
	// Encoded[i] is Events[i].Encode(): the JSON without the offset.
	Encoded [][]byte
	// Thread, if set, is the thread's row after the batch. The store fills
	// in LastOffset (when the batch has events). A store may write the
	// row's UpdatedAt lazily, to spare index writes on busy threads: read
	// back, it may trail the last batch's by up to a second, but never when
	// the status, active run or metadata changed.
	Thread *tether.Thread
	// Runs are inserted or replaced.
	Runs []*RunRecord
	// Producers are the new states of the idempotent producers whose
	// appends the batch carries, committed atomically with the events so
	// that a retry after a crash is recognised as a duplicate.
	Producers []Producer
	// Leases are preconditions on the stored leases of runs of the
	// thread: the batch is committed only if, just before it, each run's
	// row holds a lease with this token and expiry (a run without a row
	// holds the zero lease); else Commit returns ErrConflict and writes
	// nothing. A renewal writes a run's row and no event, so Version does
	// not see it: a batch that acts on a lease (ends a run whose lease
	// expired, hands it to another worker) names the lease it acted on,
	// and loses to a renewal committed first, on whichever node.
	Leases []LeaseCheck
}

// LeaseCheck is a precondition of a Batch on the stored lease of a run.
type LeaseCheck struct {
	RunID     string
	Token     string
	ExpiresAt time.Time
}

// Holds reports whether a stored lease is the one c names.
func (c LeaseCheck) Holds(l Lease) bool {
	return l.Token == c.Token && l.ExpiresAt.Equal(c.ExpiresAt)
}

// Producer is the state of an idempotent producer: the epoch and sequence
// number of the last batch it appended (the Producer-Epoch and
// Producer-Seq of the Durable Streams rules).
type Producer struct {
	// Key names the producer within its thread (the engine makes it from
	// the run and the Producer-Id).
	Key   string
	Epoch int64
	Seq   int64
}

// Result is the outcome of a committed batch.
type Result struct {
	// Records are the committed events, in order.
	Records []*tether.Record
	// Before is the thread's last offset before the batch (OffsetStart if
	// the log was empty).
	Before tether.Offset
	// Version is the thread's number of events after the batch.
	Version int64
}

// Committed is a committed batch, as reported to the notify function.
type Committed struct {
	ThreadID string
	// Before is the thread's last offset before the batch.
	Before tether.Offset
	// Records are the committed events in order; Events[i] is the decoded
	// event of Records[i], offset set. Neither may be modified.
	Records []*tether.Record
	Events  []*tether.Event
	// Deleted reports that another node sharing the store deleted the
	// thread: Records and Events are empty and Before is the last offset
	// of the deleted log. A store reports only the deletions made through
	// other handles on it (a single-node store never does).
	Deleted bool
}

// ThreadRecord is a thread's row.
type ThreadRecord struct {
	Thread tether.Thread
	// Version is the number of events in the thread's log.
	Version int64
}

// ThreadLoad is what LoadThread reads: one state of a thread.
type ThreadLoad struct {
	// Thread is the thread's row and version.
	Thread ThreadRecord
	// Checkpoint is the thread's latest checkpoint, nil if it has none
	// whose offset is an event of its log.
	Checkpoint *Checkpoint
	// Records are the first records of the log after Checkpoint.Offset
	// (after OffsetStart without a checkpoint), in order.
	Records []*tether.Record
}

// Checkpoint is a saved state of a thread (see Store.SaveCheckpoint).
type Checkpoint struct {
	// Offset is the offset of the last event the state covers.
	Offset tether.Offset
	// Data is the caller's encoding of the state.
	Data []byte
}

// ThreadQuery selects threads.
type ThreadQuery struct {
	// Namespace selects the threads whose ID is Namespace + ":" + anything.
	// Empty selects the threads whose ID has no ":" at all: the conversation
	// threads of the runs engine (tether.ValidID never has a ":"), so that
	// logs kept in the store for other purposes (Durable Streams, under
	// "ds:") stay out of thread listings.
	Namespace string
	// Status, if set, keeps only threads with this status.
	Status tether.ThreadStatus
	// Limit is the page size. Defaults to 50; at most 1000.
	Limit int
	// Cursor continues a listing (ThreadPage.Next).
	Cursor string
	// Visible, if set, keeps only the threads a user may see.
	Visible *Visibility
}

// Visibility is what a user may see of the threads: those it owns and
// those whose ID matches one of its patterns.
type Visibility struct {
	// Owner keeps the threads whose Thread.Owner is Owner (never those
	// without an owner).
	Owner string
	// Patterns keep the threads they match (see MatchPattern).
	Patterns []string
}

// Allows reports whether v lets a thread of this owner and ID be seen.
func (v *Visibility) Allows(owner, id string) bool {
	if v == nil {
		return true
	}
	if owner != "" && owner == v.Owner {
		return true
	}
	for _, p := range v.Patterns {
		if MatchPattern(p, id) {
			return true
		}
	}
	return false
}

// MatchPattern reports whether a thread ID (or a Durable Streams path)
// matches a pattern: an exact ID, a prefix followed by "*", or "*" alone,
// which matches everything.
func MatchPattern(pattern, id string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(id, prefix)
	}
	return pattern == id
}

// ThreadPage is a page of threads.
type ThreadPage struct {
	Threads []tether.Thread
	// Next continues the listing; empty on the last page.
	Next string
}

// RunRecord is a run's row: the run as clients see it plus what only the
// server keeps.
type RunRecord struct {
	Run tether.Run
	// IdempotencyKey is the key the run was created with, if any; it is
	// unique within the thread.
	IdempotencyKey string
	// Multitask is the strategy the run was created with.
	Multitask tether.Multitask
	// Lease is held by whoever runs the run.
	Lease Lease
}

// Lease is the right to append events to a run.
type Lease struct {
	// Token is the secret a worker presents with each append.
	Token string
	// Owner is the worker ID.
	Owner string
	// KeyID names the API key the lease was claimed with (an opaque digest
	// the API makes, never the token): appends and heartbeats under another
	// key are refused. Empty when the claim had no key (auth off, an
	// in-process agent) or was made before leases named their key.
	KeyID string
	// Node is the server node that runs the run in-process, if any; such a
	// run is aborted when that node restarts.
	Node string
	// ExpiresAt is when the lease ends unless renewed.
	ExpiresAt time.Time
	// Resumable says the worker's agent can resume a run from its log: when
	// the lease expires, the run waits for another worker to reclaim it
	// instead of being aborted.
	Resumable bool
}

// ThreadRunReader is implemented by stores whose run rows may trail the
// log for a moment (a store shared by several nodes writes them after the
// batch): it reads a run of a known thread as of the thread's log. Where a
// store lacks it, Run is exact.
type ThreadRunReader interface {
	// ThreadRun returns a run of a thread, or ErrNotFound.
	ThreadRun(ctx context.Context, threadID, runID string) (*RunRecord, error)
}

// AgentRegistry is implemented by stores that keep the agent names an
// operator declared (PUT /v1/agents/{name}): runs of a declared name are
// accepted before any worker asked for it, after a restart too, and on a
// store shared by several nodes, through every node.
type AgentRegistry interface {
	// DeclareAgent records a declared name. It reports whether the name
	// was new; declaring a name again keeps its first time.
	DeclareAgent(ctx context.Context, name string, at time.Time) (created bool, err error)
	// RemoveAgent removes a declaration, or returns ErrNotFound.
	RemoveAgent(ctx context.Context, name string) error
	// DeclaredAgent returns when a name was declared, or ErrNotFound.
	DeclaredAgent(ctx context.Context, name string) (time.Time, error)
	// DeclaredAgents returns every declared name and when it was declared.
	DeclaredAgents(ctx context.Context) (map[string]time.Time, error)
}

// AgentDirectory is implemented by stores that several nodes share: it
// tells every node the agent names workers asked for on any node, so that
// a run of a worker's agent may be created through a node the worker does
// not poll.
type AgentDirectory interface {
	// SawAgents records that a worker asked for runs of these agents at.
	SawAgents(ctx context.Context, names []string, at time.Time) error
	// AgentSeenAt returns when a worker last asked for the agent on any
	// node, or ErrNotFound.
	AgentSeenAt(ctx context.Context, name string) (time.Time, error)
}
