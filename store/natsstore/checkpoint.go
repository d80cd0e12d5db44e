package natsstore

import (
	"context"
	"encoding/json"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// SaveCheckpoint implements store.Store. The checkpoint is a row of the
// bucket, so its size is bounded by the server's max_payload.
func (s *Store) SaveCheckpoint(ctx context.Context, threadID string, offset tether.Offset, data []byte) error {
	if s.isClosed() {
		return store.ErrClosed
	}
	var inc uint64
	err := s.withView(ctx, threadID, func(v *threadView) error {
		if !v.exists {
			return store.ErrNotFound
		}
		inc = v.inc
		return nil
	})
	if err != nil {
		return s.readErr("save checkpoint", err)
	}
	if data == nil {
		data = []byte{}
	}
	val, err := json.Marshal(checkpointRow{rowMeta: rowMeta{Inc: inc}, Offset: offset, Data: data})
	if err != nil {
		return err
	}
	if _, err := s.publish(ctx, s.kvSubject+checkpointKey(threadID), val, -1, "", 0); err != nil {
		return s.readErr("save checkpoint", err)
	}
	return nil
}

// Checkpoint implements store.Store.
func (s *Store) Checkpoint(ctx context.Context, threadID string) (tether.Offset, []byte, error) {
	if s.isClosed() {
		return "", nil, store.ErrClosed
	}
	var inc uint64
	err := s.withView(ctx, threadID, func(v *threadView) error {
		if !v.exists {
			return store.ErrNotFound
		}
		inc = v.inc
		return nil
	})
	if err != nil {
		return "", nil, s.readErr("read checkpoint", err)
	}
	val, _, err := s.kvGet(ctx, checkpointKey(threadID))
	if err != nil {
		return "", nil, s.readErr("read checkpoint", err)
	}
	if val == nil {
		return "", nil, store.ErrNotFound
	}
	var row checkpointRow
	if err := json.Unmarshal(val, &row); err != nil {
		return "", nil, s.readErr("read checkpoint", err)
	}
	if row.Del || row.Inc != inc {
		return "", nil, store.ErrNotFound
	}
	if row.Data == nil {
		row.Data = []byte{}
	}
	return row.Offset, row.Data, nil
}
