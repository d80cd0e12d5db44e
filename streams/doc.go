// Package streams keeps Durable Streams (the open HTTP protocol for named,
// append-only, resumable streams) in a store.Store, next to the thread
// logs of the runs engine, and serves them: create, append (with
// Stream-Seq and idempotent producers), close, read (catch-up and live),
// fork, delete, TTL and expiry. Package api/durablestreams speaks the
// protocol over HTTP; package streams/wake adds its subscriptions.
//
// Start with New (the store, and the hub its commits are published to),
// then Start; use Create, Append, CatchUp (a catch-up read, whole), Read (a
// page, for live reads), Follow, Head and Delete.
//
// # How a stream is stored
//
// A stream at path p is the log "ds:"+p of the store (store namespace
// "ds"; the engine never loads IDs with a ":", and thread listings leave
// them out). Each append is one event of type ds.data (a large one, several
// committed together, each but the last with the status "continues", so
// that a fork's sub-offset can reach into the whole append) whose data is
// the bytes in base64, or for a JSON stream the array of its messages; a
// close is a ds.close event. (Pieces stored before they were marked each
// read as an append of their own: whole as ever, but a sub-offset reaches
// only within one.) A
// stream's configuration and state (content type, TTL or expiry, closed,
// last Stream-Seq, fork parent and offset, deleted) are its row's
// metadata, written in the same commit as the events; producers' states
// are the store's producer rows, in the same commit too. So a stream's
// offsets are Tether offsets, of the same format as thread offsets, and
// everything a client was told survives a crash.
//
// Writes of one stream are serialized by an in-memory lock (a fork's
// creation holds its source's too; two are always taken in the order of
// the streams' IDs), and each commit carries the version its checks saw:
// if another writer (another node) got there first, the store refuses it,
// the stream is loaded again and the write runs again on what the store
// holds (up to ten times, after a random pause that doubles each time). Reads go to the store directly;
// live reads (Follow) subscribe to the stream's log in the hub, which the
// engine feeds with every commit (with a shared store, every node's).
//
// # Several nodes on one store
//
// With Options.Shared (NATS JetStream, where other nodes write the same
// streams), a node never decides on what it cached: every write and every
// read first reads the stream's row from the store (its version, its
// configuration and state, its incarnation) and loads the stream again if
// it changed; producers' states are cached only as long as the row is the
// same. Every change of a row comes with an event, so the version check of
// the commit catches every write that raced the check: appends, closes,
// deletions (on a shared store a deletion first commits a ds.deleted
// event, which also ends the stream's live readers on every node). A
// stream deleted and created again at the same path is a new incarnation
// (meta.Inc), never mistaken for the old one. Reads of streams with a TTL
// are recorded in the store (a producer row of the stream, at most every
// quarter of the TTL per node), and a node that would expire a stream
// checks that record first, so that a stream read through one node does
// not expire on another.
//
// # Forks
//
// A fork records its source and the position it inherits up to; its own
// log holds only what was appended to it (and, for a sub-offset fork, the
// copied part of the source's next append). A read walks the chain of
// inherited segments, then the fork's own log. Offsets keep sorting in
// stream order because a fork's own events are always committed after
// what it inherits. A stream deleted while forks read it is only marked
// deleted (410) and removed with its last fork. Which streams fork a
// stream is the store's to say, not a node's memory: a fork's creation
// first appends the fork's ID to the source's log of references
// ("dsref:"+path), then creates the fork; the forks of a stream are the
// referenced streams that exist and fork it. On a shared store a deletion
// marks the stream deleted before it counts forks, and a fork, once
// created, checks that its source was not marked meanwhile (else it takes
// itself back): so of a fork and a deletion racing on two nodes, one
// always sees the other. Streams marked deleted whose forks are gone (a
// crash between the two steps) are removed at Start and by the sweeper.
//
// # Caveats
//
// Reads do not write (on a shared store, see above): the last access that
// a sliding TTL counts from is kept in memory, and after a restart every
// stream's window starts again at the later of its last write and the
// restart. A restart may so lengthen a TTL, never shorten one.
//
// Offsets are positions between whole events: a read returns whole
// appends (one over Options.ChunkBytes is stored in pieces, each a
// position, but no read, catch-up or live, ends between them), and an
// offset that is not a position of the stream (from another stream, or a
// stream deleted and created again) is refused (410 before the tail, 400
// past it), never answered with a guess.
//
// A catch-up read (CatchUp) reaches the tail in one answer, up to
// Options.CatchUpBytes, holding only about Options.ReadBytes in memory:
// it reads ahead to decide its end (an answer's headers go first), then
// reads what it did not keep again as it is written, so what follows the
// first ReadBytes is read from the store twice.
//
// Expired streams are refused from the moment they expire and removed by
// the sweeper (every Options.SweepInterval), which scans every stream's
// row.
//
// On a shared store, each read and write costs one more read of the store
// (the row). A TTL counted from another node's reads may be up to a
// quarter longer than asked (that node records reads only that often). A
// write checked against the store, then overtaken, before its commit, by
// the deletion of the stream, its creation again and as many appends to
// the new stream as the old one had, would be committed to the new one
// with the old one's configuration; that takes several requests completing
// within one read of the store.
package streams
