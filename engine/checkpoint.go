package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/runs"
	"github.com/tetherhq/tether/store"
)

// Checkpoints: a thread's committed state saved in the store as of an
// offset (store.SaveCheckpoint), so that loading the thread decodes it and
// folds only the log after it instead of the whole log.
//
// A checkpoint is a cache, never the truth: one that does not decode, is
// of a version this build does not know, or does not match the thread's
// log (another thread, another incarnation, a count of events that does
// not add up to the thread's version) is ignored with a log line and the
// log is folded from its start.
//
// Writing one costs the state's size, so a thread is checkpointed once it
// grew by Options.CheckpointEvents events and by at least its last
// checkpoint's size in log bytes. So a load reads the state and folds at
// most about as much log again (plus CheckpointEvents events): its cost
// follows the state's size, not the history's. And what checkpoints write
// stays near what the log grows by: a state grows more slowly than its
// log, each event's text being a part of the event's encoding. The state
// is cloned under the thread's read lock (a few allocations per message,
// text shared) by one background goroutine per engine, which encodes and
// saves it off the write and notify paths; the notify path only marks the
// thread as due.

// checkpointVersion is the first byte of a checkpoint: the engine's
// envelope, then the count of events the state folds (uvarint), the
// CRC-32C of the state's encoding, and the runs encoding of the state.
const checkpointVersion = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeCheckpoint encodes a state that folds n events.
func encodeCheckpoint(st *runs.State, n int64) ([]byte, error) {
	b := make([]byte, 1, 16)
	b[0] = checkpointVersion
	b = binary.AppendUvarint(b, uint64(n))
	b = append(b, 0, 0, 0, 0) // the CRC, once the state is encoded
	at := len(b)
	b, err := st.AppendBinary(b)
	if err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint32(b[at-4:at], crc32.Checksum(b[at:], castagnoli))
	return b, nil
}

// decodeCheckpoint decodes a checkpoint saved at offset of the thread whose
// row is tr, and checks that it is of that thread: the same ID, creation
// time and metadata, the offset it says, and no more events than the
// thread has. It returns the state and the number of events it folds.
func decodeCheckpoint(data []byte, offset tether.Offset, tr *store.ThreadRecord) (*runs.State, int64, error) {
	if len(data) == 0 || data[0] != checkpointVersion {
		if len(data) == 0 {
			return nil, 0, errors.New("empty checkpoint")
		}
		return nil, 0, fmt.Errorf("checkpoint of version %d", data[0])
	}
	n, k := binary.Uvarint(data[1:])
	if k <= 0 || len(data) < 1+k+4 {
		return nil, 0, errors.New("truncated checkpoint")
	}
	body := data[1+k+4:]
	if binary.BigEndian.Uint32(data[1+k:1+k+4]) != crc32.Checksum(body, castagnoli) {
		return nil, 0, errors.New("checkpoint fails its checksum")
	}
	st, err := runs.DecodeState(body)
	if err != nil {
		return nil, 0, err
	}
	th, row := st.Thread(), tr.Thread
	switch {
	case th.ID != row.ID || !th.CreatedAt.Equal(row.CreatedAt.Time) || !sameJSON(th.Metadata, row.Metadata):
		return nil, 0, errors.New("checkpoint of another thread or incarnation")
	case st.Offset() != offset:
		return nil, 0, fmt.Errorf("checkpoint saved at %s holds the state at %s", offset, st.Offset())
	case n == 0 || n > uint64(tr.Version):
		return nil, 0, fmt.Errorf("checkpoint of %d events, the thread has %d", n, tr.Version)
	}
	return st, int64(n), nil
}

// noteFolded accounts for events folded into a thread's committed state
// and queues a checkpoint of it when it is due. t.rmu is held; it never
// blocks (a full queue skips the checkpoint until the next fold).
func (e *Engine) noteFolded(t *thread, bytes int) {
	t.sinceBytes += bytes
	if e.opts.CheckpointEvents < 0 || t.ckptBusy || e.ckptQueue == nil {
		return
	}
	if t.folded-t.ckptFolded < int64(e.opts.CheckpointEvents) || t.sinceBytes < t.ckptSize {
		return
	}
	select {
	case e.ckptQueue <- t:
		t.ckptBusy = true
	default:
	}
}

// checkpointLoop writes the checkpoints queued by noteFolded, one at a time.
func (e *Engine) checkpointLoop() {
	defer e.bg.Done()
	for {
		select {
		case <-e.closing:
			return
		case t := <-e.ckptQueue:
			e.checkpoint(t)
		}
	}
}

// checkpoint saves a thread's committed state. A thread dropped from
// memory meanwhile is skipped: its state may be of a deleted incarnation
// (which the store would ignore anyway: its log has no such offset).
func (e *Engine) checkpoint(t *thread) {
	t.rmu.Lock()
	if t.retired.Load() {
		t.ckptBusy = false
		t.rmu.Unlock()
		return
	}
	st := t.state.Clone()
	n := t.folded
	bytes := t.sinceBytes
	t.rmu.Unlock()

	data, err := encodeCheckpoint(st, n)
	if err == nil && len(data) > e.opts.CheckpointMaxBytes {
		err = fmt.Errorf("the state is %d bytes, above the limit of %d", len(data), e.opts.CheckpointMaxBytes)
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = e.st.SaveCheckpoint(ctx, t.id, st.Offset(), data)
		cancel()
	}

	t.rmu.Lock()
	defer t.rmu.Unlock()
	t.ckptBusy = false
	// Failed or not, the next try is after as much growth again: a state
	// the store refuses (too large) is not encoded after every event.
	t.ckptFolded = n
	t.sinceBytes -= bytes
	t.ckptSize = max(t.ckptSize, len(data))
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrClosed) {
			e.log.Warn("checkpoint not saved: loads fold the log since the last one", "thread", t.id, "offset", st.Offset(), "err", err)
		}
		return
	}
	t.ckptSize = len(data)
	e.counters.Checkpoints.Add(1)
}
