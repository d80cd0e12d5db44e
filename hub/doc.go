// Package hub fans committed events out to the subscribers of each thread,
// in memory.
//
// The engine commits a batch of events to the store, then hands the
// committed records to [Hub.Publish], in commit order. A reader calls
// [Hub.Subscribe] with the offset it has seen (or OffsetStart) and loops on
// [Subscriber.Next], or selects on [Subscriber.Ready] and calls
// [Subscriber.TryNext] when it also has heartbeats to send. It gets every
// record after its offset exactly once, in order: first what it missed,
// then live records. Records are shared, never copied or re-encoded.
//
// Each thread has a topic: a ring of its recent records, which holds every
// record after some offset (the ring's base) so that a resume from a recent
// offset needs no store read, and its subscribers. Each subscriber has a
// bounded queue; Publish appends to every queue and wakes the reader with a
// non-blocking signal, so its cost is O(subscribers) and a slow reader can
// neither block it nor grow the server: the reader is cut with [ErrSlow]
// and resumes from [Subscriber.Offset], which the durable log makes free.
// The hub runs no goroutine of its own.
//
// # The handover from history to live
//
// The facts it rests on:
//
//   - F1. A record is published only after it is committed, so a History
//     read that starts after a publish returns the published records.
//   - F2. Batches of a thread are published in commit order, which is
//     offset order; a batch is the whole log segment after its before.
//   - F3. Publish and Subscribe hold the topic lock, so each batch is
//     published either before a subscriber registers or after, and then
//     it is delivered to the subscriber.
//
// A subscriber has a position pos (the last record returned), a queue that
// is the log segment (pos, tail], and a mode. A live subscriber keeps the
// invariant L: every record of the log after tail is yet to be published.
// A batch (before, last] then arrives with before <= tail, by F2: the part
// after tail extends the queue without a gap, and the part up to tail,
// already queued, is dropped by offset. A batch with before > tail breaks L
// (a publish was missed, e.g. after the topic was evicted): the subscriber
// switches to catch-up. Subscribe makes a subscriber live only when the
// ring covers its cursor (and what follows fits in half its buffer): the
// ring is contiguous up to the last published offset, so L holds with tail
// at that offset.
//
// Otherwise the subscriber catches up: Next reads History after tail, page
// by page, outside any lock, while published batches collect in pending,
// the log segment (pendBase, end of pending] (a batch that does not follow
// pending replaces it: what it replaces was published, so committed, so in
// History by F1). The invariant K: every record after tail that is not in
// pending either precedes pending and was published, so History has it, or
// follows pending and is yet to be published. Registering under the topic
// lock (F3) establishes K: everything published before is committed. After
// each page, under the subscriber lock (which Publish also takes):
//
//   - if pending is not empty and pendBase <= tail, pending continues the
//     log from tail: its records after tail are appended, the rest dropped
//     by offset, and by K everything after it is yet to be published: L.
//   - if pending is empty and History said the page reached the end of
//     the log (more is false: a page cut short by HistoryBytes is not the
//     end), History was at the end of the log after registration; everything published so far was
//     published before registration (else it would be pending), so it was
//     in that read (F1): everything after tail is yet to be published: L.
//     The first batch published next has before <= tail, by F2.
//   - otherwise the subscriber reads the next page; the log is finite and
//     pendBase is committed, so this ends.
//
// Nothing compares sequence numbers: offsets are only compared, so
// contiguity comes from F2 and the before of each batch. The race test
// (TestRaceHandover) checks the result against the log under -race.
//
// # Caveats
//
// The slice Next returns is reused by the following call (it is emptied,
// so keeping it fails loudly): write its records, then call Next again.
// Copy the slice, not the records, to keep them longer.
//
// Publish relies on F1 and F2: publishing before commit would show clients
// records that may never exist, and publishing out of order is treated as
// a gap (subscribers fetch the batch from History again). A subscriber never
// sees a gap, but a hub that is fed one does more store reads.
//
// A batch larger than the subscriber buffer (BufferEvents or BufferBytes)
// is taken by a subscriber with nothing queued (it is not behind), and
// cuts one that has records queued: what a subscriber holds is bounded by
// its buffer or one batch, whichever is larger.
//
// A subscriber in catch-up holds one page of History at a time, until its
// reader has taken it: at most HistoryPage records and HistoryBytes bytes,
// or one record larger than that. The bytes matter when events are large:
// 512 events of 900 KB are 460 MB for one stalled stream.
//
// A subscriber in catch-up counts the records published meanwhile against
// its buffer, so one that reads a long history while the thread is busy can
// be cut with ErrSlow before it gets live; it resumes from its offset.
//
// Rings are kept for up to Options.IdleTopics threads without subscribers;
// with the defaults that can reach 256 MiB of shared records on a busy
// server (the records are already in memory while queued, but an idle ring
// holds them longer).
//
// Subscribe takes OffsetStart or an event offset, not OffsetNow: the hub
// knows the tail of a thread only once something was published; the engine
// resolves "now" against the store.
package hub
