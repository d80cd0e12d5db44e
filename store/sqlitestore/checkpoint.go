package sqlitestore

import (
	"context"
	"fmt"
	"time"
)

// Variables, not constants, so that tests can make them small.
var (
	// checkpointEvery is how often the checkpointer copies new WAL frames
	// into the file. The writer never does (wal_autocheckpoint is off), so
	// a checkpoint never adds to the latency of a commit.
	checkpointEvery = 250 * time.Millisecond
	// walRestartPages is the WAL size (4 KiB pages: 64 MiB) past which a
	// checkpoint also makes the WAL start over. Under a steady stream of
	// commits a passive checkpoint never catches up with the writer, and
	// SQLite only rewinds a WAL that is checkpointed to its end, so without
	// this the WAL would grow for as long as the stream lasts.
	walRestartPages = 16384
	// checkpointBusyTimeout bounds how long a RESTART checkpoint holds the
	// writer back while it waits for readers; if they take longer, it gives
	// up until the checkpointer finds the WAL too long again.
	checkpointBusyTimeout = 200 * time.Millisecond
	// restartRetry spaces the writer's attempts to restart a WAL that
	// readers hold, so that a long read does not stall every commit.
	restartRetry = 20 * time.Millisecond
)

// checkpointLoop checkpoints the WAL while there are commits, until Close.
func (s *Store) checkpointLoop() {
	defer close(s.ckptDone)
	t := time.NewTicker(s.ckptEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stopCkpt:
			return
		case <-t.C:
		}
		if s.dirty.Swap(false) {
			s.checkpoint()
		}
	}
}

func (s *Store) checkpoint() {
	// While a restart is pending, stand aside: a passive checkpoint running
	// at the same time makes the writer's RESTART fail, and under a steady
	// stream of commits the WAL would then grow without bound.
	if s.walFull.Load() {
		return
	}
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	var busy, logPages, done int
	if err := s.cdb.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &logPages, &done); err != nil {
		s.log.Warn("sqlitestore: checkpoint", "path", s.path, "err", err)
		return
	}
	if logPages >= s.walRestartPages {
		s.walFull.Store(true)
	}
}

// restartWAL makes the WAL start over; the writer calls it between two
// transactions once the checkpointer found the WAL too long. Only the
// writer can: from another connection, a RESTART checkpoint waits for the
// writer to pause, which under a steady stream it never does. The passive
// checkpoints have copied most frames already, so this mostly waits for the
// readers to leave the WAL, for at most checkpointBusyTimeout.
func (s *Store) restartWAL() {
	// Never wait for the checkpointer: if it is mid-checkpoint, try again
	// after the next transaction.
	if !s.ckptMu.TryLock() {
		s.walFull.Store(true)
		return
	}
	defer s.ckptMu.Unlock()
	if time.Since(s.lastRestart) < restartRetry {
		s.walFull.Store(true)
		return
	}
	s.lastRestart = time.Now()
	ctx := context.Background()
	if _, err := s.wconn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", checkpointBusyTimeout.Milliseconds())); err != nil {
		s.log.Warn("sqlitestore: checkpoint", "path", s.path, "err", err)
		return
	}
	var busy, logPages, done int
	if err := s.wconn.QueryRowContext(ctx, `PRAGMA wal_checkpoint(RESTART)`).Scan(&busy, &logPages, &done); err != nil {
		s.log.Warn("sqlitestore: checkpoint", "path", s.path, "err", err)
	}
	if busy != 0 {
		// Readers held the WAL: try again soon rather than when the
		// checkpointer next finds it too long.
		s.walFull.Store(true)
	}
	if _, err := s.wconn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", busyTimeout.Milliseconds())); err != nil {
		s.log.Warn("sqlitestore: checkpoint", "path", s.path, "err", err)
	}
}
