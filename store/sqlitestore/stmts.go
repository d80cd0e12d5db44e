package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
)

// writerStmts are prepared once on the writer connection: the write path
// never parses SQL.
type writerStmts struct {
	begin, commit, rollback            *sql.Stmt
	savepoint, release, rollbackTo     *sql.Stmt
	threadState                        *sql.Stmt
	insertThread, updateThread         *sql.Stmt
	updateThreadLog                    *sql.Stmt
	insertEvents                       [maxRowsPerInsert + 1]*sql.Stmt // by number of rows, prepared on use
	upsertRun, upsertCheckpoint        *sql.Stmt
	deleteEvents, deleteRuns           *sql.Stmt
	deleteCheckpoint, deleteThreadByPK *sql.Stmt
	upsertProducer, deleteProducers    *sql.Stmt
	saveLastEventID                    *sql.Stmt
	runLease                           *sql.Stmt
}

func (w *writerStmts) list() []struct {
	p *(*sql.Stmt)
	q string
} {
	return []struct {
		p *(*sql.Stmt)
		q string
	}{
		{&w.begin, sqlBegin}, {&w.commit, sqlCommit}, {&w.rollback, sqlRollback},
		{&w.savepoint, sqlSavepoint}, {&w.release, sqlRelease}, {&w.rollbackTo, sqlRollbackTo},
		{&w.threadState, sqlThreadState},
		{&w.insertThread, sqlInsertThread}, {&w.updateThread, sqlUpdateThread},
		{&w.updateThreadLog, sqlUpdateThreadLog},
		{&w.upsertRun, sqlUpsertRun}, {&w.upsertCheckpoint, sqlUpsertCheckpoint},
		{&w.deleteEvents, sqlDeleteEvents}, {&w.deleteRuns, sqlDeleteRuns},
		{&w.deleteCheckpoint, sqlDeleteCheckpoint}, {&w.deleteThreadByPK, sqlDeleteThread},
		{&w.upsertProducer, sqlUpsertProducer}, {&w.deleteProducers, sqlDeleteProducers},
		{&w.saveLastEventID, sqlSaveLastEventID},
		{&w.runLease, sqlRunLease},
	}
}

func (w *writerStmts) prepare(ctx context.Context, c *sql.Conn) error {
	for _, s := range w.list() {
		st, err := c.PrepareContext(ctx, s.q)
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		*s.p = st
	}
	return nil
}

func (w *writerStmts) close() {
	for _, s := range w.list() {
		if *s.p != nil {
			_ = (*s.p).Close()
			*s.p = nil
		}
	}
	for i, st := range w.insertEvents {
		if st != nil {
			_ = st.Close()
			w.insertEvents[i] = nil
		}
	}
}

// maxRowsPerInsert caps the events of one INSERT statement (eventColumns
// parameters each, far below SQLite's limit of 32766).
const maxRowsPerInsert = 64

// eventColumns are the parameters of one event's row in sqlInsertEvents.
const eventColumns = 7

// readerStmts are prepared on the reader pool; database/sql prepares each
// on a pooled connection the first time it runs there.
type readerStmts struct {
	threadPK, threadPKCursor, readEvents *sql.Stmt
	thread, threadWithPK, eventOf        *sql.Stmt
	threads, threadsAfter                *sql.Stmt
	threadsStatus, threadsStatusAfter    *sql.Stmt
	run, runByKey, activeRuns            *sql.Stmt
	checkpoint, producer                 *sql.Stmt
}

func (r *readerStmts) list() []struct {
	p *(*sql.Stmt)
	q string
} {
	return []struct {
		p *(*sql.Stmt)
		q string
	}{
		{&r.threadPK, sqlThreadPK}, {&r.threadPKCursor, sqlThreadPKCursor}, {&r.readEvents, sqlReadEvents},
		{&r.thread, sqlThread}, {&r.threadWithPK, sqlThreadWithPK}, {&r.eventOf, sqlEventOf},
		{&r.threads, sqlThreads}, {&r.threadsAfter, sqlThreadsAfter},
		{&r.threadsStatus, sqlThreadsStatus}, {&r.threadsStatusAfter, sqlThreadsStatusAfter},
		{&r.run, sqlRun}, {&r.runByKey, sqlRunByKey}, {&r.activeRuns, sqlActiveRuns},
		{&r.checkpoint, sqlCheckpoint}, {&r.producer, sqlProducer},
	}
}

func (r *readerStmts) prepare(ctx context.Context, db *sql.DB) error {
	for _, s := range r.list() {
		st, err := db.PrepareContext(ctx, s.q)
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		*s.p = st
	}
	return nil
}

func (r *readerStmts) close() {
	for _, s := range r.list() {
		if *s.p != nil {
			_ = (*s.p).Close()
			*s.p = nil
		}
	}
}
