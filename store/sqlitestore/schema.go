package sqlitestore

// schemaVersion is stored in PRAGMA user_version. Open refuses a file with a
// newer version rather than misread it.
const schemaVersion = 5

// schema creates the tables of an empty file; every statement is idempotent
// so that Open runs it unconditionally.
//
// Times are integers: thread times in Unix milliseconds (the precision of
// tether.Time, so they round-trip exactly and sort as numbers), lease
// expiries in Unix nanoseconds (0 when unset).
var schema = []string{
	// meta holds the store's epoch.
	`CREATE TABLE IF NOT EXISTS meta (
		key   TEXT PRIMARY KEY,
		value INTEGER NOT NULL
	) WITHOUT ROWID`,

	// pk is what events point at: an integer keeps the events index small,
	// and AUTOINCREMENT means a deleted thread's pk is never given to a new
	// thread, so a reader that looked up a pk just before a delete can never
	// read another thread's events under it.
	`CREATE TABLE IF NOT EXISTS threads (
		pk            INTEGER PRIMARY KEY AUTOINCREMENT,
		id            TEXT NOT NULL UNIQUE,
		status        TEXT NOT NULL,
		metadata      BLOB,
		created_at    INTEGER NOT NULL,
		updated_at    INTEGER NOT NULL,
		last_offset   TEXT NOT NULL,
		active_run_id TEXT NOT NULL,
		version       INTEGER NOT NULL,
		owner         TEXT NOT NULL DEFAULT '',
		` + threadProducerColumns + `
	)`,
	// Threads() walks one of these backwards (ORDER BY updated_at DESC, id
	// DESC) from the keyset cursor, so a page costs O(limit).
	`CREATE INDEX IF NOT EXISTS threads_by_updated ON threads (updated_at, id)`,
	`CREATE INDEX IF NOT EXISTS threads_by_status ON threads (status, updated_at, id)`,
	sqlThreadsByOwner,

	// id is the sequence part of the offset. The writer assigns it from the
	// highest id it knows. Deleting a thread records that high-water mark
	// in meta (last_event_id), so an id is never given twice, even after
	// the newest events were deleted and the store reopened. That costs a
	// write per delete; AUTOINCREMENT would cost a page write per
	// transaction. epoch is the epoch the event was written in: with id
	// and thread it must match a cursor exactly.
	`CREATE TABLE IF NOT EXISTS events (
		id         INTEGER PRIMARY KEY,
		thread     INTEGER NOT NULL,
		epoch      INTEGER NOT NULL,
		type       TEXT NOT NULL,
		run_id     TEXT NOT NULL,
		message_id TEXT NOT NULL,
		data       BLOB NOT NULL
	)`,
	// The rowid is implicitly the last column, so this is (thread, id): a
	// read from a cursor is one index seek plus the rows returned.
	`CREATE INDEX IF NOT EXISTS events_by_thread ON events (thread)`,

	// seq is the insertion order (ActiveRuns returns oldest first); an
	// upsert keeps it. idempotency_key is NULL when the run has none, so the
	// unique index never makes two keyless runs collide; the same index
	// serves DeleteThread's scan by thread_id.
	`CREATE TABLE IF NOT EXISTS runs (
		seq              INTEGER PRIMARY KEY,
		id               TEXT NOT NULL UNIQUE,
		thread_id        TEXT NOT NULL,
		status           TEXT NOT NULL,
		idempotency_key  TEXT,
		multitask        TEXT NOT NULL,
		lease_token      TEXT NOT NULL,
		lease_owner      TEXT NOT NULL,
		lease_node       TEXT NOT NULL,
		lease_resumable  INTEGER NOT NULL DEFAULT 0,
		lease_expires_at INTEGER NOT NULL,
		lease_key_id     TEXT NOT NULL DEFAULT '',
		run              BLOB NOT NULL
	)`,
	`CREATE UNIQUE INDEX IF NOT EXISTS runs_by_key ON runs (thread_id, idempotency_key)`,
	// Only live runs are in this index, so the startup scan of ActiveRuns
	// does not grow with the history of finished runs.
	`CREATE INDEX IF NOT EXISTS runs_active ON runs (seq) WHERE ` + activeRunsWhere,

	// The state of idempotent producers, written in the same transaction as
	// the events of their appends; but a thread's latest producer is kept
	// in its thread row instead (threadProducerColumns), and written here
	// only once another producer appends to the thread.
	`CREATE TABLE IF NOT EXISTS producers (
		thread_id TEXT NOT NULL,
		key       TEXT NOT NULL,
		epoch     INTEGER NOT NULL,
		seq       INTEGER NOT NULL,
		PRIMARY KEY (thread_id, key)
	) WITHOUT ROWID`,

	`CREATE TABLE IF NOT EXISTS checkpoints (
		thread_id TEXT PRIMARY KEY,
		offset    TEXT NOT NULL,
		data      BLOB NOT NULL
	)`,

	sqlCreateAgents,
}

// sqlCreateAgents holds the agent names an operator declared
// (store.AgentRegistry), with when, in Unix milliseconds.
const sqlCreateAgents = `CREATE TABLE IF NOT EXISTS agents (
		name        TEXT PRIMARY KEY,
		declared_at INTEGER NOT NULL
	) WITHOUT ROWID`

// migrations bring a file of an older version up to schemaVersion:
// migrations[v] takes version v to v+1. A new file gets the schema above
// directly.
var migrations = map[int][]string{
	// Version 2: leases name the API key that claimed them. Rows of runs
	// claimed before get '' (no key), which any worker key may use.
	1: {`ALTER TABLE runs ADD COLUMN lease_key_id TEXT NOT NULL DEFAULT ''`},
	// Version 3: declared agent names.
	2: {sqlCreateAgents},
	// Version 4: threads carry their owner (the sub of the signed token
	// that created them); threads created before have none.
	3: {`ALTER TABLE threads ADD COLUMN owner TEXT NOT NULL DEFAULT ''`, sqlThreadsByOwner},
	// Version 5: a thread row holds the state of its latest producer.
	// Threads written before have none there; their producers are all in
	// the producers table.
	4: {
		`ALTER TABLE threads ADD COLUMN producer_key TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE threads ADD COLUMN producer_epoch INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE threads ADD COLUMN producer_seq INTEGER NOT NULL DEFAULT 0`,
	},
}

// threadProducerColumns hold the state of the thread's latest idempotent
// producer (producer_key ” when none). Most threads have one producer
// at a time (a run's worker, a Durable Streams writer), and the thread
// row is written by every append anyway: keeping that producer's state in
// it saves every append a write of a second row, on a page of its own,
// in another table. The producers table holds the state of the others.
const threadProducerColumns = `producer_key   TEXT NOT NULL DEFAULT '',
		producer_epoch INTEGER NOT NULL DEFAULT 0,
		producer_seq   INTEGER NOT NULL DEFAULT 0`

// sqlThreadsByOwner serves a user's listing (ThreadQuery.Visible): the
// threads of one owner, newest first.
const sqlThreadsByOwner = `CREATE INDEX IF NOT EXISTS threads_by_owner ON threads (owner, updated_at, id)`

// activeRunsWhere must appear verbatim in the ActiveRuns query so that
// SQLite uses the partial index.
const activeRunsWhere = `status IN ('pending', 'running', 'waiting')`

// Statements of the writer connection, prepared once at Open.
const (
	sqlBegin    = `BEGIN IMMEDIATE`
	sqlCommit   = `COMMIT`
	sqlRollback = `ROLLBACK`
	// One savepoint name is enough: savepoints never nest here.
	sqlSavepoint  = `SAVEPOINT batch`
	sqlRelease    = `RELEASE batch`
	sqlRollbackTo = `ROLLBACK TO batch`

	sqlThreadState = `SELECT pk, version, last_offset, producer_key, producer_epoch, producer_seq
		FROM threads WHERE id = ?`
	sqlInsertThread = `INSERT INTO threads
		(id, status, metadata, created_at, updated_at, last_offset, active_run_id, version, owner,
		 producer_key, producer_epoch, producer_seq)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlUpdateThread = `UPDATE threads SET
		status = ?, metadata = ?, created_at = ?, updated_at = ?, active_run_id = ?,
		last_offset = ?, version = ?, producer_key = ?, producer_epoch = ?, producer_seq = ?
		WHERE pk = ?`
	sqlUpdateThreadLog = `UPDATE threads SET last_offset = ?, version = ?,
		producer_key = ?, producer_epoch = ?, producer_seq = ? WHERE pk = ?`
	sqlRunLease = `SELECT lease_token, lease_expires_at FROM runs WHERE id = ? AND thread_id = ?`
	// sqlInsertEvents is followed by one "(?, ?, ?, ?, ?, ?, ?)" per event.
	sqlInsertEvents = `INSERT INTO events (id, thread, epoch, type, run_id, message_id, data) VALUES `
	sqlUpsertRun    = `INSERT INTO runs
		(id, thread_id, status, idempotency_key, multitask,
		 lease_token, lease_owner, lease_node, lease_expires_at, lease_resumable, lease_key_id, run)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET
		 thread_id = excluded.thread_id, status = excluded.status,
		 idempotency_key = excluded.idempotency_key, multitask = excluded.multitask,
		 lease_token = excluded.lease_token, lease_owner = excluded.lease_owner,
		 lease_node = excluded.lease_node, lease_expires_at = excluded.lease_expires_at,
		 lease_resumable = excluded.lease_resumable, lease_key_id = excluded.lease_key_id,
		 run = excluded.run`
	sqlUpsertCheckpoint = `INSERT INTO checkpoints (thread_id, offset, data) VALUES (?, ?, ?)
		ON CONFLICT (thread_id) DO UPDATE SET offset = excluded.offset, data = excluded.data`
	sqlUpsertProducer = `INSERT INTO producers (thread_id, key, epoch, seq) VALUES (?, ?, ?, ?)
		ON CONFLICT (thread_id, key) DO UPDATE SET epoch = excluded.epoch, seq = excluded.seq`
	sqlDeleteProducers  = `DELETE FROM producers WHERE thread_id = ?`
	sqlDeleteEvents     = `DELETE FROM events WHERE thread = ?`
	sqlDeleteRuns       = `DELETE FROM runs WHERE thread_id = ?`
	sqlDeleteCheckpoint = `DELETE FROM checkpoints WHERE thread_id = ?`
	sqlDeleteThread     = `DELETE FROM threads WHERE pk = ?`
	sqlLastEventID      = `SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0), coalesce((SELECT max(id) FROM events), 0), coalesce((SELECT value FROM meta WHERE key = 'last_event_id'), 0))`
	sqlSaveLastEventID  = `INSERT INTO meta (key, value) VALUES ('last_event_id', ?)
		ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)`
	sqlCheckpointWAL = `PRAGMA wal_checkpoint(TRUNCATE)`
)

// Statements of the reader pool.
const (
	threadColumns = `id, status, metadata, created_at, updated_at, last_offset, active_run_id, version, owner`
	runColumns    = `idempotency_key, multitask, lease_token, lease_owner, lease_node, lease_expires_at, lease_resumable, lease_key_id, run`

	sqlThreadPK = `SELECT pk FROM threads WHERE id = ?`
	// The cursor check and the thread lookup are one round trip.
	sqlThreadPKCursor = `SELECT pk, EXISTS (SELECT 1 FROM events e WHERE e.id = ? AND e.thread = t.pk AND e.epoch = ?)
		FROM threads t WHERE t.id = ?`
	sqlReadEvents = `SELECT id, epoch, type, run_id, message_id, data FROM events
		WHERE thread = ? AND id > ? ORDER BY id LIMIT ?`
	sqlThread = `SELECT ` + threadColumns + ` FROM threads WHERE id = ?`
	// LoadThread's: the row with its pk, and whether an offset (id, epoch)
	// is an event of the thread with that pk.
	sqlThreadWithPK = `SELECT pk, ` + threadColumns + ` FROM threads WHERE id = ?`
	sqlEventOf      = `SELECT EXISTS (SELECT 1 FROM events WHERE id = ? AND epoch = ? AND thread = ?)`

	// The namespace filter takes three arguments (see nsArgs): a flag that
	// selects IDs without a ":", or the range [ns+":", ns+";") of IDs with
	// the namespace's prefix.
	threadsNamespace = `((? = 1 AND instr(id, ':') = 0) OR (id >= ? AND id < ?))`

	sqlThreads = `SELECT ` + threadColumns + ` FROM threads
		WHERE ` + threadsNamespace + `
		ORDER BY updated_at DESC, id DESC LIMIT ?`
	sqlThreadsAfter = `SELECT ` + threadColumns + ` FROM threads
		WHERE ` + threadsNamespace + ` AND (updated_at, id) < (?, ?)
		ORDER BY updated_at DESC, id DESC LIMIT ?`
	sqlThreadsStatus = `SELECT ` + threadColumns + ` FROM threads
		WHERE ` + threadsNamespace + ` AND status = ?
		ORDER BY updated_at DESC, id DESC LIMIT ?`
	sqlThreadsStatusAfter = `SELECT ` + threadColumns + ` FROM threads
		WHERE ` + threadsNamespace + ` AND status = ? AND (updated_at, id) < (?, ?)
		ORDER BY updated_at DESC, id DESC LIMIT ?`

	sqlRun        = `SELECT ` + runColumns + ` FROM runs WHERE id = ?`
	sqlRunByKey   = `SELECT ` + runColumns + ` FROM runs WHERE thread_id = ? AND idempotency_key = ?`
	sqlActiveRuns = `SELECT ` + runColumns + ` FROM runs WHERE ` + activeRunsWhere + ` ORDER BY seq`
	sqlCheckpoint = `SELECT offset, data FROM checkpoints WHERE thread_id = ?`
	// The thread row's state of a producer is newer than the table's,
	// which is what it was when another producer last took its place.
	sqlProducer = `SELECT epoch, seq FROM (
		SELECT 0 AS o, producer_epoch AS epoch, producer_seq AS seq FROM threads
			WHERE id = ?1 AND producer_key = ?2 AND ?2 != ''
		UNION ALL
		SELECT 1, epoch, seq FROM producers WHERE thread_id = ?1 AND key = ?2)
		ORDER BY o LIMIT 1`
)
