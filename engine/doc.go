// Package engine is the one path every event takes, whoever produced it (a
// worker over HTTP, an in-process agent, the sweeper): validate it against
// the thread's state machine (package runs), commit it to the store, then
// publish it to the hub. Subscriptions start from a snapshot or an offset and
// hand over from stored history to live events with no gap and no duplicate.
//
// Use New with a store, then Start (which finishes runs left behind by a
// previous process and starts the sweeper), then the methods for threads,
// runs, claims, appends and subscriptions. Close when done.
//
// # The write path
//
// Each thread has a speculative state machine: the committed state plus the
// batches accepted but not yet committed. An append is a plan: a function
// that looks at that state and returns events; the engine applies them to a
// transaction of the machine (all or nothing), queues them, and answers the
// caller once the store has committed them and the hub has them. A thread
// has at most one batch in flight; appends that arrive meanwhile are combined
// into the next batch, and batches of many threads share one store
// transaction (group commit), so a busy thread costs one commit per round
// trip to the store, not one per append. If a commit fails, the speculative
// state is rebuilt from the committed one and the queued plans are
// validated again, so nothing is ever built on an event that was not
// committed.
//
// # Caveats
//
// The engine assumes it is the only writer of its store (one node). Runs
// held by in-process agents of this node are aborted when the node starts.
package engine
