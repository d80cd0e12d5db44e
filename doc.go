// Package tether holds the domain of Tether: durable, resumable streams for
// agent runs.
//
// A thread has one ordered, append-only event log. Every event of every run
// on the thread is committed to that log before any client sees it, and the
// state of the thread (its runs, its messages and their parts) is a pure fold
// of the log. Clients follow a log from an opaque [Offset] and resume from the
// last offset they saw, losing nothing and seeing nothing twice.
//
// This package defines the types that cross every boundary: [Event] and
// [Record] (one committed event and its encoding), [Offset], [Thread], [Run],
// [Message] and [Part], the status enums, [Snapshot], and [Error] with its
// stable codes. It does no I/O. The packages below it do the work:
//
//   - runs: the state machine and the reducer (pure).
//   - store: the durable log and metadata (sqlitestore is the default).
//   - hub: in-memory fan-out of committed events.
//   - engine: the one write path (validate, commit, publish) and subscriptions.
//   - agents: who produces events in-process (the demo agent, the runner).
//   - api: HTTP, SSE and WebSocket over the engine.
//   - client: the Go client.
//
// Start with cmd/tether (tether serve) to see how the parts are put together.
//
// # Caveats
//
// Offsets are opaque. Compare them only with [Offset.Compare] (or as strings,
// which is the same), never parse them in clients: their format may change.
package tether
