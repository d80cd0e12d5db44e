package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// LoadThread implements store.Store. The thread's view (its row, version,
// incarnation and last message, from the stream's leader) fixes the state
// read; the checkpoint and the events are read as of it. Below the view's
// last message a thread's log changes only by a purge, which a read sees
// (it stops short of that message): such a load is done again from a
// fresh view, which then says the thread is gone or is its new
// incarnation. The checkpoint row names its incarnation, and its offset
// must be an event of a message of that incarnation, up to the view's
// last message; else it is left out.
func (s *Store) LoadThread(ctx context.Context, id string, limit int) (*store.ThreadLoad, error) {
	if s.isClosed() {
		return nil, store.ErrClosed
	}
	for range 5 {
		var (
			exists    bool
			inc, last uint64
			tr        store.ThreadRecord
		)
		err := s.withView(ctx, id, func(v *threadView) error {
			exists, inc, last = v.exists, v.inc, v.seq
			if exists {
				tr = store.ThreadRecord{Thread: v.record(), Version: v.version}
			}
			return nil
		})
		if err != nil {
			return nil, s.readErr("load thread", err)
		}
		if !exists {
			return nil, store.ErrNotFound
		}
		ld := &store.ThreadLoad{Thread: tr}
		if ld.Checkpoint, err = s.loadCheckpoint(ctx, id, inc, last); err != nil {
			return nil, err
		}
		after := tether.OffsetStart
		if ld.Checkpoint != nil {
			after = ld.Checkpoint.Offset
		}
		recs, complete, _, err := s.readEvents(ctx, id, inc, last, after, limit, 0)
		if errors.Is(err, store.ErrOffsetNotFound) && ld.Checkpoint != nil {
			// The checkpoint's event is not in this log (or was purged
			// since the view): load without it.
			ld.Checkpoint = nil
			recs, complete, _, err = s.readEvents(ctx, id, inc, last, tether.OffsetStart, limit, 0)
		}
		if err != nil {
			return nil, err
		}
		if complete {
			ld.Records = recs
			return ld, nil
		}
	}
	return nil, fmt.Errorf("natsstore: load thread %s: %w: it keeps being deleted while it is read", id, store.ErrUnavailable)
}

// loadCheckpoint reads the checkpoint of the incarnation inc of a thread
// whose last message is last: nil if there is none, or if its offset is not
// in that range of the log.
func (s *Store) loadCheckpoint(ctx context.Context, id string, inc, last uint64) (*store.Checkpoint, error) {
	val, _, err := s.kvGet(ctx, checkpointKey(id))
	if err != nil {
		return nil, s.readErr("load checkpoint", err)
	}
	if val == nil {
		return nil, nil
	}
	var row checkpointRow
	if err := json.Unmarshal(val, &row); err != nil {
		// A row this build cannot read is a cache miss, not a fault: the
		// log has the truth.
		s.log.Warn("natsstore: unreadable checkpoint row, ignored", "thread", id, "err", err)
		return nil, nil
	}
	if row.Del || row.Inc != inc {
		return nil, nil
	}
	epoch, seq, err := tether.ParseOffset(row.Offset)
	if err != nil || epoch != s.epoch {
		return nil, nil
	}
	if m := seq / eventsPerMsg; m < inc || m > last {
		return nil, nil
	}
	if row.Data == nil {
		row.Data = []byte{}
	}
	return &store.Checkpoint{Offset: row.Offset, Data: row.Data}, nil
}
