// Package streams keeps Durable Streams (the open HTTP protocol for named,
// append-only, resumable streams) in a store.Store, next to the thread
// logs of the runs engine, and serves them: create, append (with
// Stream-Seq and idempotent producers), close, read (catch-up and live),
// fork, delete, TTL and expiry. Package api/durablestreams speaks the
// protocol over HTTP; package streams/wake adds its subscriptions.
//
// Start with New (the store, and the hub its commits are published to),
// then Start; use Create, Append, Read, Follow, Head and Delete.
//
// # How a stream is stored
//
// A stream at path p is the log "ds:"+p of the store (store namespace
// "ds"; the engine never loads IDs with a ":", and thread listings leave
// them out). Each append is one event of type ds.data (a large one, several
// committed together) whose data is the bytes in base64, or for a JSON
// stream the array of its messages; a close is a ds.close event. A
// stream's configuration and state (content type, TTL or expiry, closed,
// last Stream-Seq, fork parent and offset, deleted) are its row's
// metadata, written in the same commit as the events; producers' states
// are the store's producer rows, in the same commit too. So a stream's
// offsets are Tether offsets, of the same format as thread offsets, and
// everything a client was told survives a crash.
//
// Writes of one stream are serialized by an in-memory lock, and each
// commit carries the version its checks saw: if another writer (another
// node) got there first, the store refuses it and the stream is loaded
// again. Reads go to the store directly; live reads (Follow) subscribe to
// the stream's log in the hub, which the engine feeds with every commit.
//
// # Forks
//
// A fork records its source and the position it inherits up to; its own
// log holds only what was appended to it (and, for a sub-offset fork, the
// copied part of the source's next append). A read walks the chain of
// inherited segments, then the fork's own log. Offsets keep sorting in
// stream order because a fork's own events are always committed after
// what it inherits. A stream deleted while forks read it is only marked
// deleted (410) and removed with its last fork; the count of forks is
// rebuilt from the rows at Start, so a crash never leaks one.
//
// # Caveats
//
// Reads do not write: the last access that a sliding TTL counts from is
// kept in memory, and after a restart every stream's window starts again
// at the later of its last write and the restart. A restart may so
// lengthen a TTL, never shorten one.
//
// Offsets are positions between whole events: a read returns whole
// appends (or whole chunks of a large one), and an offset that is not a
// position of the stream (from another stream, or a stream deleted and
// created again) is refused (410 before the tail, 400 past it), never
// answered with a guess.
//
// Expired streams are refused from the moment they expire and removed by
// the sweeper (every Options.SweepInterval), which scans every stream's
// row.
package streams
