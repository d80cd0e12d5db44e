package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math"
	"strings"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// ReadEvents implements store.Store. The empty offset reads from the start,
// like OffsetStart. A limit of zero or less returns no records (after the
// thread and cursor checks). The cursor is checked by an
// exact match of its sequence, epoch and thread, so an offset from another
// thread, from an epoch whose events were lost, or of a deleted event is
// ErrOffsetNotFound, never a silent jump.
func (s *Store) ReadEvents(ctx context.Context, threadID string, after tether.Offset, limit int) ([]*tether.Record, error) {
	recs, _, err := s.ReadPage(ctx, threadID, after, limit, 0)
	return recs, err
}

// ReadPage implements store.Store. It stops scanning at the first row that
// would take the page past maxBytes, so what it holds is the page and that
// one row, which it drops.
func (s *Store) ReadPage(ctx context.Context, threadID string, after tether.Offset, limit, maxBytes int) ([]*tether.Record, bool, error) {
	if s.closed.Load() {
		return nil, false, store.ErrClosed
	}
	var pk, afterID int64
	switch after {
	case tether.OffsetStart, "":
		if err := s.r.threadPK.QueryRowContext(ctx, threadID).Scan(&pk); err != nil {
			return nil, false, s.notFound("read thread", err)
		}
	default:
		epoch, seq, err := tether.ParseOffset(after)
		if err != nil || epoch > math.MaxInt64 || seq > math.MaxInt64 {
			// Still ErrNotFound first if the thread is unknown.
			if err := s.r.threadPK.QueryRowContext(ctx, threadID).Scan(&pk); err != nil {
				return nil, false, s.notFound("read thread", err)
			}
			return nil, false, store.ErrOffsetNotFound
		}
		var ok bool
		if err := s.r.threadPKCursor.QueryRowContext(ctx, int64(seq), int64(epoch), threadID).Scan(&pk, &ok); err != nil {
			return nil, false, s.notFound("read thread", err)
		}
		if !ok {
			return nil, false, store.ErrOffsetNotFound
		}
		afterID = int64(seq)
	}
	if limit <= 0 {
		return nil, true, nil
	}

	rows, err := s.r.readEvents.QueryContext(ctx, pk, afterID, limit)
	if err != nil {
		return nil, false, s.readErr("read events", err)
	}
	defer rows.Close()
	recs := make([]*tether.Record, 0, min(limit, 256))
	size := 0
	for rows.Next() {
		var id, epoch int64
		rec := new(tether.Record)
		if err := rows.Scan(&id, &epoch, &rec.Type, &rec.RunID, &rec.MessageID, &rec.Data); err != nil {
			return nil, false, s.readErr("read events", err)
		}
		rec.Offset = formatOffset(uint64(epoch), uint64(id))
		size += rec.Size()
		if maxBytes > 0 && len(recs) > 0 && size > maxBytes {
			return recs, true, nil // rows.Close (deferred) ends the scan
		}
		recs = append(recs, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, false, s.readErr("read events", err)
	}
	return recs, len(recs) == limit, nil
}

// notFound maps "no row" to ErrNotFound.
func (s *Store) notFound(what string, err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return s.readErr(what, err)
}

// Thread implements store.Store.
func (s *Store) Thread(ctx context.Context, id string) (*store.ThreadRecord, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	var tr store.ThreadRecord
	if err := scanThread(s.r.thread.QueryRowContext(ctx, id), &tr); err != nil {
		return nil, s.notFound("read thread", err)
	}
	return &tr, nil
}

type scanner interface{ Scan(dest ...any) error }

func scanThread(sc scanner, tr *store.ThreadRecord) error {
	var (
		t                  = &tr.Thread
		status, lastOffset string
		metadata           []byte
		created, updated   int64
	)
	if err := sc.Scan(&t.ID, &status, &metadata, &created, &updated, &lastOffset, &t.ActiveRunID, &tr.Version, &t.Owner); err != nil {
		return err
	}
	t.Status = tether.ThreadStatus(status)
	if metadata != nil {
		t.Metadata = json.RawMessage(metadata)
	}
	t.CreatedAt, t.UpdatedAt = fromMillis(created), fromMillis(updated)
	t.LastOffset = tether.Offset(lastOffset)
	return nil
}

// Threads implements store.Store. The cursor is the (updated_at, id) of the
// last thread of the page: a listing walks the index from there, so every
// page costs the same, and a thread updated meanwhile moves to the front
// instead of shifting the pages after it.
func (s *Store) Threads(ctx context.Context, q store.ThreadQuery) (*store.ThreadPage, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	limit := q.PageLimit()

	var (
		rows *sql.Rows
		err  error
	)
	ns := nsArgs(q.Namespace)
	switch {
	case q.Visible != nil:
		query, args, ok := visibleQuery(q, limit+1)
		if !ok {
			return nil, tether.Errorf(tether.CodeBadRequest, "thread cursor is malformed")
		}
		rows, err = s.rdb.QueryContext(ctx, query, args...)
	case q.Cursor == "" && q.Status == "":
		rows, err = s.r.threads.QueryContext(ctx, append(ns, limit+1)...)
	case q.Cursor == "":
		rows, err = s.r.threadsStatus.QueryContext(ctx, append(ns, string(q.Status), limit+1)...)
	default:
		updated, id, ok := store.DecodeThreadCursor(q.Cursor)
		if !ok {
			return nil, tether.Errorf(tether.CodeBadRequest, "thread cursor is malformed")
		}
		if q.Status == "" {
			rows, err = s.r.threadsAfter.QueryContext(ctx, append(ns, updated, id, limit+1)...)
		} else {
			rows, err = s.r.threadsStatusAfter.QueryContext(ctx, append(ns, string(q.Status), updated, id, limit+1)...)
		}
	}
	if err != nil {
		return nil, s.readErr("list threads", err)
	}
	defer rows.Close()
	page := &store.ThreadPage{Threads: make([]tether.Thread, 0, min(limit, 64))}
	for rows.Next() {
		var tr store.ThreadRecord
		if err := scanThread(rows, &tr); err != nil {
			return nil, s.readErr("list threads", err)
		}
		page.Threads = append(page.Threads, tr.Thread)
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr("list threads", err)
	}
	if len(page.Threads) > limit {
		page.Threads = page.Threads[:limit]
		last := page.Threads[limit-1]
		page.Next = store.EncodeThreadCursor(millis(last.UpdatedAt), last.ID)
	}
	return page, nil
}

// visibleQuery builds the listing of the threads a user may see: its own
// (by the threads_by_owner index) and those its patterns match. It is
// built per call, as the patterns vary; ok is false for a bad cursor.
func visibleQuery(q store.ThreadQuery, limit int) (query string, args []any, ok bool) {
	var b strings.Builder
	b.WriteString(`SELECT ` + threadColumns + ` FROM threads WHERE ` + threadsNamespace + ` AND (`)
	args = nsArgs(q.Namespace)
	b.WriteString(`(owner <> '' AND owner = ?)`)
	args = append(args, q.Visible.Owner)
	for _, p := range q.Visible.Patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			b.WriteString(` OR substr(id, 1, ?) = ?`)
			args = append(args, len(prefix), prefix)
		} else {
			b.WriteString(` OR id = ?`)
			args = append(args, p)
		}
	}
	b.WriteString(`)`)
	if q.Status != "" {
		b.WriteString(` AND status = ?`)
		args = append(args, string(q.Status))
	}
	if q.Cursor != "" {
		updated, id, ok := store.DecodeThreadCursor(q.Cursor)
		if !ok {
			return "", nil, false
		}
		b.WriteString(` AND (updated_at, id) < (?, ?)`)
		args = append(args, updated, id)
	}
	b.WriteString(` ORDER BY updated_at DESC, id DESC LIMIT ?`)
	return b.String(), append(args, limit), true
}

// nsArgs returns the arguments of the threadsNamespace filter.
func nsArgs(ns string) []any {
	if ns == "" {
		return []any{1, "", ""}
	}
	return []any{0, ns + ":", ns + ";"}
}

// Run implements store.Store.
func (s *Store) Run(ctx context.Context, id string) (*store.RunRecord, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	var rr store.RunRecord
	if err := scanRun(s.r.run.QueryRowContext(ctx, id), &rr); err != nil {
		return nil, s.notFound("read run", err)
	}
	return &rr, nil
}

// RunByKey implements store.Store.
func (s *Store) RunByKey(ctx context.Context, threadID, key string) (*store.RunRecord, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	if key == "" {
		return nil, store.ErrNotFound // keyless runs are stored with a NULL key
	}
	var rr store.RunRecord
	if err := scanRun(s.r.runByKey.QueryRowContext(ctx, threadID, key), &rr); err != nil {
		return nil, s.notFound("read run", err)
	}
	return &rr, nil
}

// ActiveRuns implements store.Store.
func (s *Store) ActiveRuns(ctx context.Context) ([]*store.RunRecord, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	rows, err := s.r.activeRuns.QueryContext(ctx)
	if err != nil {
		return nil, s.readErr("read runs", err)
	}
	defer rows.Close()
	var runs []*store.RunRecord
	for rows.Next() {
		rr := new(store.RunRecord)
		if err := scanRun(rows, rr); err != nil {
			return nil, s.readErr("read runs", err)
		}
		runs = append(runs, rr)
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr("read runs", err)
	}
	return runs, nil
}

func scanRun(sc scanner, rr *store.RunRecord) error {
	var (
		key       sql.NullString
		multitask string
		expires   int64
		js        []byte
	)
	if err := sc.Scan(&key, &multitask, &rr.Lease.Token, &rr.Lease.Owner, &rr.Lease.Node, &expires, &rr.Lease.Resumable, &rr.Lease.KeyID, &js); err != nil {
		return err
	}
	if err := json.Unmarshal(js, &rr.Run); err != nil {
		return err
	}
	rr.IdempotencyKey = key.String
	rr.Multitask = tether.Multitask(multitask)
	rr.Lease.ExpiresAt = fromNanos(expires)
	return nil
}

// Checkpoint implements store.Store.
func (s *Store) Checkpoint(ctx context.Context, threadID string) (tether.Offset, []byte, error) {
	if s.closed.Load() {
		return "", nil, store.ErrClosed
	}
	var (
		offset string
		data   []byte
	)
	if err := s.r.checkpoint.QueryRowContext(ctx, threadID).Scan(&offset, &data); err != nil {
		return "", nil, s.notFound("read checkpoint", err)
	}
	if data == nil {
		data = []byte{}
	}
	return tether.Offset(offset), data, nil
}

// Producer implements store.Store.
func (s *Store) Producer(ctx context.Context, threadID, key string) (*store.Producer, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	p := store.Producer{Key: key}
	if err := s.r.producer.QueryRowContext(ctx, threadID, key).Scan(&p.Epoch, &p.Seq); err != nil {
		return nil, s.notFound("read producer", err)
	}
	return &p, nil
}
