package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// encodedRun is a run row ready to bind: encoding happens on the caller's
// goroutine, not on the single writer.
type encodedRun struct {
	id, status, multitask string
	key                   any // nil (NULL) when the run has no key
	token, owner, node    string
	keyID                 string
	expires               int64
	resumable             bool
	json                  []byte
}

// Commit implements store.Store. Batches of all callers are queued for one
// writer, which commits as many as are waiting in one transaction.
//
// If ctx ends while the batch is still queued, Commit returns ctx.Err() and
// the batch is never committed. Once the writer has taken the batch, Commit
// waits for its outcome (at most one transaction) and returns that, so a
// caller never loses track of a batch that did commit.
func (s *Store) Commit(ctx context.Context, b *store.Batch) (*store.Result, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	if err := check(b); err != nil {
		return nil, err
	}
	r := &request{ctx: ctx, check: (*Store).checkCommit, write: (*Store).writeCommit,
		savepoint: len(b.Runs) > 0, weight: max(1, len(b.Events)), b: b}
	r.data = make([][]byte, len(b.Encoded))
	for i, enc := range b.Encoded {
		r.data[i] = tether.WithOffset(enc, placeholder)
	}
	if len(b.Runs) > 0 {
		r.runs = make([]encodedRun, len(b.Runs))
		for i, rr := range b.Runs {
			if err := encodeRun(&r.runs[i], rr); err != nil {
				return nil, err
			}
		}
	}
	if err := s.do(r); err != nil {
		return nil, err
	}
	return r.res, nil
}

// check rejects batches the engine should never build.
func check(b *store.Batch) error {
	switch {
	case b == nil:
		return errors.New("sqlitestore: nil batch")
	case b.ThreadID == "":
		return errors.New("sqlitestore: batch without thread ID")
	case b.Create && b.Thread == nil:
		return errors.New("sqlitestore: batch creates a thread without its row")
	case len(b.Encoded) != len(b.Events):
		return fmt.Errorf("sqlitestore: batch has %d events and %d encodings", len(b.Events), len(b.Encoded))
	}
	for i, enc := range b.Encoded {
		if len(enc) < 2 || enc[0] != '{' || b.Events[i] == nil {
			return fmt.Errorf("sqlitestore: event %d is not an encoded event", i)
		}
	}
	for _, rr := range b.Runs {
		if rr == nil || rr.Run.ID == "" {
			return errors.New("sqlitestore: run without ID")
		}
		if rr.Run.ThreadID != b.ThreadID {
			return fmt.Errorf("sqlitestore: run %s belongs to thread %q, not %q", rr.Run.ID, rr.Run.ThreadID, b.ThreadID)
		}
	}
	return nil
}

func encodeRun(dst *encodedRun, rr *store.RunRecord) error {
	js, err := json.Marshal(rr.Run)
	if err != nil {
		return fmt.Errorf("sqlitestore: encode run %s: %w", rr.Run.ID, err)
	}
	*dst = encodedRun{
		id:        rr.Run.ID,
		status:    string(rr.Run.Status),
		multitask: string(rr.Multitask),
		token:     rr.Lease.Token,
		owner:     rr.Lease.Owner,
		node:      rr.Lease.Node,
		keyID:     rr.Lease.KeyID,
		expires:   nanos(rr.Lease.ExpiresAt),
		resumable: rr.Lease.Resumable,
		json:      js,
	}
	if rr.IdempotencyKey != "" {
		dst.key = rr.IdempotencyKey
	}
	return nil
}

// checkCommit checks a batch's preconditions.
func (s *Store) checkCommit(r *request) error {
	b := r.b
	st, err := s.thread(b.ThreadID)
	switch {
	case err != nil:
		return err
	case b.Create && st != nil:
		return store.ErrExists
	case b.Create:
		return s.checkLeases(b)
	case st == nil:
		return store.ErrNotFound
	case st.version != b.Version:
		return store.ErrConflict
	}
	if err := s.checkLeases(b); err != nil {
		return err
	}
	r.thread = st
	return nil
}

// checkLeases returns store.ErrConflict unless each run of the batch's
// checks holds the lease it names (store.Batch.Leases). It runs inside the
// writer's transaction, after the batches before this one.
func (s *Store) checkLeases(b *store.Batch) error {
	for _, c := range b.Leases {
		var l store.Lease
		var expires int64
		err := s.w.runLease.QueryRow(c.RunID, b.ThreadID).Scan(&l.Token, &expires)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("read lease of run %s: %w", c.RunID, err)
		}
		l.ExpiresAt = fromNanos(expires)
		if !c.Holds(l) {
			return store.ErrConflict
		}
	}
	return nil
}

// writeCommit writes a batch. It runs on the writer inside the group's
// transaction; the ids it assigns are final once the transaction commits.
func (s *Store) writeCommit(r *request) error {
	b := r.b
	st := r.thread
	if b.Create {
		st = &threadState{last: string(tether.OffsetStart)}
	}
	n := int64(len(b.Events))
	first := s.lastID + 1
	last := st.last
	if n > 0 {
		if first+n-1 > maxEventID {
			return errors.New("sqlitestore: event ids exhausted")
		}
		buf := make([]byte, n*offsetLen)
		for i := range n {
			putOffset(buf[i*offsetLen:], s.epoch, uint64(first+i))
		}
		r.offsets = string(buf)
		for i, d := range r.data {
			copy(d[placeholderAt:], r.offsets[i*offsetLen:(i+1)*offsetLen])
		}
		last = r.offsets[(n-1)*offsetLen:]
	}
	version := st.version + n
	producer, spill := nextProducer(st.producer, b.Producers)

	pk := st.pk
	var row *tether.Thread // the row written in full, if any
	switch t := b.Thread; {
	case b.Create:
		res, err := s.w.insertThread.Exec(b.ThreadID, string(t.Status), blob(t.Metadata),
			millis(t.CreatedAt), millis(t.UpdatedAt), last, t.ActiveRunID, version, t.Owner,
			producer.Key, producer.Epoch, producer.Seq)
		if err != nil {
			return fmt.Errorf("insert thread: %w", err)
		}
		if pk, err = res.LastInsertId(); err != nil {
			return fmt.Errorf("insert thread: %w", err)
		}
		row = t
	case t != nil && !st.row.sameRow(t):
		if _, err := s.w.updateThread.Exec(string(t.Status), blob(t.Metadata), millis(t.CreatedAt),
			millis(t.UpdatedAt), t.ActiveRunID, last, version, producer.Key, producer.Epoch, producer.Seq, pk); err != nil {
			return fmt.Errorf("update thread: %w", err)
		}
		row = t
	case n > 0 || producer != st.producer:
		if _, err := s.w.updateThreadLog.Exec(last, version, producer.Key, producer.Epoch, producer.Seq, pk); err != nil {
			return fmt.Errorf("update thread: %w", err)
		}
	}

	for i := range r.runs {
		rr := &r.runs[i]
		if _, err := s.w.upsertRun.Exec(rr.id, b.ThreadID, rr.status, rr.key, rr.multitask,
			rr.token, rr.owner, rr.node, rr.expires, rr.resumable, rr.keyID, rr.json); err != nil {
			return fmt.Errorf("write run %s: %w", rr.id, translate(err))
		}
	}

	for _, p := range spill {
		if _, err := s.w.upsertProducer.Exec(b.ThreadID, p.Key, p.Epoch, p.Seq); err != nil {
			return fmt.Errorf("write producer: %w", err)
		}
	}

	if r.savepoint {
		// Its events must go in before its savepoint is released, so
		// that a rollback to it takes them out too.
		if err := s.insertEvents(b.Events, r.data, first, pk); err != nil {
			return err
		}
	} else {
		s.deferEvents(b.Events, r.data, first, pk)
	}

	// Written: only now may the writer's state move on.
	s.lastID += n
	r.before = tether.Offset(st.last)
	r.version = version
	if b.Create {
		st.pk = pk
		s.cacheThread(b.ThreadID, st)
	}
	st.version, st.last, st.producer = version, last, producer
	if row != nil {
		st.row.set(row)
	}
	return nil
}

// deferEvents adds the rows of events with ids from first on to those the
// writer inserts together (insertDeferred) before the transaction commits
// or anything else reads or deletes events. With one event per batch, one
// INSERT per group instead of one per batch saves the per-statement work
// of the writer (binding, executing, resetting, database/sql's own) on all
// but one of the batches.
func (s *Store) deferEvents(evs []*tether.Event, data [][]byte, first, pk int64) {
	epoch := int64(s.epoch)
	for i, e := range evs {
		s.args = append(s.args, first+int64(i), pk, epoch, e.Type, e.RunID, e.MessageID, data[i])
	}
}

// insertDeferred inserts the rows deferEvents added, up to
// maxRowsPerInsert per statement.
func (s *Store) insertDeferred() error {
	all, args := s.args, s.args
	defer func() {
		clear(all) // keep no event alive
		s.args = all[:0]
	}()
	for len(args) > 0 {
		n := min(len(args)/eventColumns, maxRowsPerInsert)
		st, err := s.insertStmt(n)
		if err != nil {
			return err
		}
		if _, err := st.Exec(args[:n*eventColumns]...); err != nil {
			return fmt.Errorf("insert events: %w", err)
		}
		args = args[n*eventColumns:]
	}
	return nil
}

// insertEvents inserts events with ids from first on at once.
func (s *Store) insertEvents(evs []*tether.Event, data [][]byte, first, pk int64) error {
	if err := s.insertDeferred(); err != nil {
		return err
	}
	s.deferEvents(evs, data, first, pk)
	return s.insertDeferred()
}

// insertStmt returns the statement that inserts n events, preparing it on
// first use.
func (s *Store) insertStmt(n int) (*sql.Stmt, error) {
	if st := s.w.insertEvents[n]; st != nil {
		return st, nil
	}
	var q strings.Builder
	q.WriteString(sqlInsertEvents)
	for i := range n {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?, ?, ?, ?, ?, ?, ?)")
	}
	st, err := s.wconn.PrepareContext(context.Background(), q.String())
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	s.w.insertEvents[n] = st
	return st, nil
}

// DeleteThread implements store.Store. The deletion goes through the writer,
// so it is ordered with the commits around it.
func (s *Store) DeleteThread(ctx context.Context, id string) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return s.do(&request{ctx: ctx, check: (*Store).checkThread, write: (*Store).writeDelete, weight: 1, threadID: id})
}

// checkThread checks that r's thread exists.
func (s *Store) checkThread(r *request) error {
	st, err := s.thread(r.threadID)
	if err != nil {
		return err
	}
	if st == nil {
		return store.ErrNotFound
	}
	r.thread = st
	return nil
}

func (s *Store) writeDelete(r *request) error {
	pk := r.thread.pk
	steps := []struct {
		st  *sql.Stmt
		arg any
	}{
		{s.w.deleteEvents, pk},
		{s.w.deleteRuns, r.threadID},
		{s.w.deleteCheckpoint, r.threadID},
		{s.w.deleteProducers, r.threadID},
		// The deleted events may be the newest: keep their ids used.
		{s.w.saveLastEventID, s.lastID},
		{s.w.deleteThreadByPK, pk},
	}
	for _, st := range steps {
		if _, err := st.st.Exec(st.arg); err != nil {
			return fmt.Errorf("delete thread: %w", err)
		}
	}
	delete(s.threads, r.threadID)
	return nil
}

// SaveCheckpoint implements store.Store.
func (s *Store) SaveCheckpoint(ctx context.Context, threadID string, offset tether.Offset, data []byte) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if data == nil {
		data = []byte{} // the column is NOT NULL
	}
	return s.do(&request{ctx: ctx, check: (*Store).checkThread, write: (*Store).writeCheckpoint, weight: 1,
		threadID: threadID, offset: offset, ckpt: data})
}

func (s *Store) writeCheckpoint(r *request) error {
	if _, err := s.w.upsertCheckpoint.Exec(r.threadID, string(r.offset), r.ckpt); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	return nil
}

// millis is the column value of a thread time; the zero time maps to its
// own (negative) Unix milliseconds so that it round-trips exactly.
func millis(t tether.Time) int64 { return t.UnixMilli() }

func fromMillis(ms int64) tether.Time { return tether.At(time.UnixMilli(ms)) }

// nanos is the column value of a lease expiry: 0 when unset.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// blob binds empty JSON as NULL.
func blob(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}
