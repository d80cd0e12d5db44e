package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"math"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// LoadThread implements store.Store. Its reads are one read transaction,
// so they see one state of the file (WAL snapshot isolation): the row, the
// checkpoint and the events of the same incarnation of the thread. The
// checkpoint is checked like a cursor (its event's id, epoch and thread),
// so one saved for an incarnation that was deleted since is left out. The
// later pages are anchored by their cursor in the same way: a thread
// deleted and created again gets a new pk (AUTOINCREMENT), so a cursor of
// the old one is ErrOffsetNotFound, never a read of the new one.
func (s *Store) LoadThread(ctx context.Context, id string, limit int) (*store.ThreadLoad, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	tx, err := s.rdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, s.readErr("load thread", err)
	}
	// Read only: nothing to commit, and a rollback ends the snapshot.
	defer func() { _ = tx.Rollback() }()

	ld := new(store.ThreadLoad)
	var pk int64
	row := tx.StmtContext(ctx, s.r.threadWithPK).QueryRowContext(ctx, id)
	if err := scanThreadPK(row, &pk, &ld.Thread); err != nil {
		return nil, s.notFound("load thread", err)
	}
	ld.Checkpoint, err = s.loadCheckpoint(ctx, tx, id, pk)
	if err != nil {
		return nil, err
	}
	var afterID int64
	if ld.Checkpoint != nil {
		_, seq, _ := tether.ParseOffset(ld.Checkpoint.Offset)
		afterID = int64(seq)
	}
	if limit <= 0 {
		return ld, nil
	}
	rows, err := tx.StmtContext(ctx, s.r.readEvents).QueryContext(ctx, pk, afterID, limit)
	if err != nil {
		return nil, s.readErr("load thread", err)
	}
	defer rows.Close()
	ld.Records = make([]*tether.Record, 0, min(limit, 256))
	for rows.Next() {
		var id, epoch int64
		rec := new(tether.Record)
		if err := rows.Scan(&id, &epoch, &rec.Type, &rec.RunID, &rec.MessageID, &rec.Data); err != nil {
			return nil, s.readErr("load thread", err)
		}
		rec.Offset = formatOffset(uint64(epoch), uint64(id))
		ld.Records = append(ld.Records, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr("load thread", err)
	}
	return ld, nil
}

// loadCheckpoint reads the checkpoint of the thread with pk in tx, nil if
// it has none or its offset is not an event of that thread.
func (s *Store) loadCheckpoint(ctx context.Context, tx *sql.Tx, id string, pk int64) (*store.Checkpoint, error) {
	var (
		offset string
		data   []byte
	)
	err := tx.StmtContext(ctx, s.r.checkpoint).QueryRowContext(ctx, id).Scan(&offset, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, s.readErr("load checkpoint", err)
	}
	epoch, seq, err := tether.ParseOffset(tether.Offset(offset))
	if err != nil || epoch > math.MaxInt64 || seq > math.MaxInt64 {
		return nil, nil
	}
	var ok bool
	if err := tx.StmtContext(ctx, s.r.eventOf).QueryRowContext(ctx, int64(seq), int64(epoch), pk).Scan(&ok); err != nil {
		return nil, s.readErr("load checkpoint", err)
	}
	if !ok {
		return nil, nil
	}
	if data == nil {
		data = []byte{}
	}
	return &store.Checkpoint{Offset: tether.Offset(offset), Data: data}, nil
}

func scanThreadPK(sc scanner, pk *int64, tr *store.ThreadRecord) error {
	return scanThread(prefixScanner{sc, pk}, tr)
}

// prefixScanner scans a row whose first column is an extra one (the pk)
// into first, and the rest as its scanner's caller expects.
type prefixScanner struct {
	sc    scanner
	first any
}

func (p prefixScanner) Scan(dest ...any) error {
	return p.sc.Scan(append([]any{p.first}, dest...)...)
}
