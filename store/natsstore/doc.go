// Package natsstore is a store.Store on NATS JetStream: several Tether
// nodes can share one, on one server or on a cluster.
//
// Use Open, then the store.Store methods:
//
//	st, err := natsstore.Open(ctx, natsstore.Options{URL: "nats://a:4222,nats://b:4222", Replicas: 3})
//	if err != nil {
//		return err
//	}
//	defer st.Close()
//
// Open creates what is missing: the stream of the logs, the bucket of the
// metadata and the repairer's durable consumer. In a stream or bucket that
// exists, it turns on the per-message TTLs and direct gets the store uses
// (a bucket made by another tool may lack them) and leaves the rest as is.
//
// # The log
//
// Every thread's log is a subject of one stream (Options.Subject, then a
// token made from the thread's ID: lowercase base32hex, so any ID makes one
// valid token). One Commit is one message on that subject: the batch's
// events and everything else it changes (the thread's row, runs, producer
// states, whether it creates the thread). A batch is therefore atomic by
// construction, in the log.
//
// The message is published with the thread's last message as the expected
// last sequence of its subject (0 when the subject is empty, for a Create).
// So the check of the batch's precondition and the append are one atomic
// step of the stream: of two nodes committing to one thread at the same
// version, one gets the sequence and the other ErrConflict. Each node keeps
// a cache of the threads' states, checks a batch against it and learns it
// was stale from a failed publish; it then reads the thread's state again
// and checks again. Batches of different threads are in flight together:
// JetStream's throughput is the group commit.
//
// The offset of event i of the message with stream sequence seq is
// tether.FormatOffset(epoch, seq*10000+i). Stream sequences are never
// reused, a purge included, so offsets are unique in the store and increase
// along a thread; a cursor maps back to (seq, i) and is valid only if that
// message is on the thread's subject, of its current incarnation, holds
// event i and the epoch matches. The epoch is the stream's creation time in
// Unix seconds (or its metadata EpochMetadata): a stream made anew never
// hands out an offset of the old one.
//
// Every node follows the whole stream with an ordered consumer, from where
// it ended when the node opened: that is how every batch, whichever node
// committed it, reaches the node's notify function, in the stream's order,
// with the offset before it (the message says it). A Commit returns once
// its own node's consumer has reported it.
//
// ReadEvents reads from the cursor's message on, subject-filtered, by
// sequence: the stream's per-subject index finds it, so a read costs the
// events it returns. It asks the leader of the stream for the thread's
// last message first, then any replica for many messages at once (direct
// gets): a replica may lag, but below a bound the leader gave, the log only
// changes by a purge, so what a replica returns is right and where it stops
// short the leader is asked for the rest.
//
// # The metadata
//
// A key-value bucket (Options.Bucket) holds the rows the log's messages
// imply: threads (with version and last offset), runs, the active runs, the
// runs of each thread, idempotency keys, producers, checkpoints. The bucket
// is a projection of the log, and the log is the truth. The committing node
// writes a batch's rows after its publish and before its Commit returns.
// Each row records the message that wrote it and is replaced only by a row
// of a later message (compare-and-set on the key's revision); a deleted row
// is a tombstone for a day, so that a late writer of an older message
// cannot bring it back. The thread's row is written last, from the row of
// exactly the previous message of the thread: so it is a watermark, and when
// it says "message n", every row of the thread's messages up to n is in the
// bucket. A writer that finds the row behind first writes what the log has
// in between.
//
// Reads scoped to a thread (Thread, ReadEvents, LoadThread, RunByKey,
// Producer, Checkpoint, and Run once it knows the run's thread) ask the leader for the
// thread's last message and read repair: they take the bucket's rows, then
// fold the log messages after the thread's row (usually none, or the one
// batch in flight) before answering. Rows of a deleted incarnation of a
// thread are recognised by their incarnation (the sequence of the thread's
// Create) and ignored.
//
// Threads and ActiveRuns read many keys; each is one request to any
// replica, taken only if it contains a fence this node wrote just before,
// so no acknowledged write is missed (more than 1024 keys: an ordered
// consumer, up to the fence).
//
// DeleteThread publishes a tombstone message on the thread's subject, like
// a batch (a commit racing it fails its expected sequence), then tombstones
// the thread's rows and purges the subject up to the tombstone. The
// tombstone stays for a day (Options.TombstoneTTL, a per-message TTL): a
// node that was not following the log when it was published (cut off from
// NATS) resumes after the purge and still hears of the deletion. A node
// cut off for half of that or longer may not: once back, it reports
// store.FeedState.Forget, and the engine reads every thread from the
// store again. A later Create starts a new incarnation, with offsets
// above every old one.
//
// The repairer: all nodes pull from one durable consumer of the log (each
// makes it again if it is deleted) and
// check each message once it is Options.RepairDelay old, writing any rows
// its committer did not (it died after the publish) and finishing any
// deletion that stopped half way. Checking a message a node wrote itself
// costs nothing: it knows the revision of the thread's row it wrote.
//
// # What is atomic, and why that is safe
//
// Atomic: a batch, and its check against the thread's version (and against
// a deletion), in one publish. Offsets, notification order, Before and
// Version all derive from the log, so every node agrees on them.
//
// Not atomic: the bucket's rows with the log, and the rows among
// themselves. That is safe because nothing reads the rows without the log
// where exactness matters: a commit checks idempotency keys against rows
// plus the log after the thread's row, and the publish's expected sequence
// guarantees that state was the last; thread-scoped reads fold the same
// tail. A row is only ever written after its message is in the log, so no
// read shows an uncommitted batch. A Commit that returned has written its
// rows, so every read after it, on any node, sees them.
//
// # Caveats
//
// If a node dies between a publish and its row writes, the batch is
// committed (and reported to every node's notify function) but until the
// repairer writes its rows, Threads, ActiveRuns and Run of a run that batch
// created do not show it: for RepairDelay, or up to the repair consumer's
// ack wait (a minute) for messages the dead node had pulled for repair.
// Thread-scoped reads and commits are exact throughout.
//
// A batch is one message: its encoding must fit the server's max_payload
// (1 MiB by default; raise it, up to 64 MiB, for large tool outputs; that
// of the server the connection is on at the time) and the stream's
// max_msg_size if one is set (else Commit returns store.ErrTooLarge), and
// hold fewer than 10,000 events and runs. Offsets fit 10^12 messages per
// stream. A checkpoint, a row, has the same size limit.
//
// Threads costs O(threads of the namespace) per page: the bucket has no
// index by time. ActiveRuns costs one request per thread with an active
// run.
//
// Offsets never lie only as long as JetStream keeps what it acknowledged.
// With one replica and the server's default sync interval, a power loss
// can lose the last acknowledged messages, and their sequences would be
// handed out again: run three replicas, or sync_interval: always. After
// restoring the stream from a backup, set its metadata EpochMetadata to the
// current Unix time before opening it.
//
// A publish whose outcome is unknown (a timeout, a lost connection) is
// resolved by looking at the message after the expected one and publishing
// again under the same message ID, which the stream's duplicate window (two
// minutes) drops if the first one landed.
//
// The bucket allows direct gets (this store's bulk reads need them); other
// clients reading it directly may read from a lagging replica.
//
// A run keeps the idempotency key it was created with: a row that changed a
// run's key would not free the old one.
//
// A Commit returns success only once this node's consumer of the log has
// reported the batch to the notify function, so that whatever the caller
// tells its client is already visible to subscribers. While that consumer
// is stalled (recreated after missed heartbeats, its server lost), the
// node's commits wait for it, logged after Timeout; once Close has started
// they wait Timeout more and then return ErrUnavailable, though stored.
//
// On a cluster, a new ordered consumer's first pull is now and then lost;
// the client recreates the consumer after two missed heartbeats, so the
// notify consumer (at Open) or a large scan may stall for about a second.
package natsstore
