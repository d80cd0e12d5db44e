package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
	"github.com/tetherhq/tether/store"
)

// CreateThread creates a thread. If a thread with the ID exists with the
// same metadata it is returned with created false; with other metadata the
// error is a conflict. An empty id gets a new ID.
func (e *Engine) CreateThread(ctx context.Context, id string, metadata json.RawMessage) (tether.Thread, bool, error) {
	return e.CreateOwnedThread(ctx, id, "", metadata)
}

// CreateOwnedThread is CreateThread for a thread owned by owner (the sub of
// a signed token; see tether.Thread.Owner). A thread that exists is
// returned (or refused for other metadata) as it is, with its own owner,
// whatever owner says: the caller decides whether its user may see it.
func (e *Engine) CreateOwnedThread(ctx context.Context, id, owner string, metadata json.RawMessage) (tether.Thread, bool, error) {
	if e.closed.Load() {
		return tether.Thread{}, false, errClosed
	}
	if id == "" {
		id = tether.NewID("thr_")
	}
	if !tether.ValidID(id) {
		return tether.Thread{}, false, tether.Errorf(tether.CodeBadRequest, "thread id must be "+tether.IDRule)
	}
	if err := e.afterDeletes(ctx, id); err != nil {
		return tether.Thread{}, false, err
	}
	metadata = compactObject(metadata)
	if err := checkMetadataSize(metadata, "metadata"); err != nil {
		return tether.Thread{}, false, err
	}
	now := e.now()
	row := tether.Thread{ID: id, Status: tether.ThreadIdle, Metadata: metadata, CreatedAt: now, UpdatedAt: now, LastOffset: tether.OffsetStart, Owner: owner}
	_, err := e.st.Commit(ctx, &store.Batch{ThreadID: id, Create: true, Thread: &row})
	if err == nil {
		return row, true, nil
	}
	if !errors.Is(err, store.ErrExists) {
		return tether.Thread{}, false, e.storeErr(err, "thread %s", id)
	}
	rec, err := e.st.Thread(ctx, id)
	if err != nil {
		return tether.Thread{}, false, e.storeErr(err, "thread %s", id)
	}
	if !sameJSON(rec.Thread.Metadata, metadata) {
		return tether.Thread{}, false, tether.Errorf(tether.CodeConflict, "thread %s already exists with other metadata", id)
	}
	return rec.Thread, false, nil
}

// Thread returns the state of a thread as of its last committed event.
func (e *Engine) Thread(ctx context.Context, id string) (*tether.Snapshot, error) {
	t, err := e.thread(ctx, id)
	if err != nil {
		return nil, err
	}
	snap := t.snapshotState().Snapshot()
	t.wmu.Lock()
	snap.Thread.Owner = t.row.Owner // a row's, not the log's
	t.wmu.Unlock()
	return snap, nil
}

// ThreadOwner returns the owner of a thread (tether.Thread.Owner). It
// returns not_found if the thread does not exist.
func (e *Engine) ThreadOwner(ctx context.Context, id string) (string, error) {
	t, err := e.thread(ctx, id)
	if err != nil {
		return "", err
	}
	t.wmu.Lock()
	defer t.wmu.Unlock()
	return t.row.Owner, nil
}

// RunThread returns the thread of a run and its owner. It returns
// not_found if the run does not exist.
func (e *Engine) RunThread(ctx context.Context, runID string) (threadID, owner string, err error) {
	t, err := e.threadOfRun(ctx, runID)
	if err != nil {
		return "", "", err
	}
	t.wmu.Lock()
	defer t.wmu.Unlock()
	return t.id, t.row.Owner, nil
}

// Threads lists threads, most recently updated first.
func (e *Engine) Threads(ctx context.Context, q store.ThreadQuery) (*store.ThreadPage, error) {
	page, err := e.st.Threads(ctx, q)
	if err != nil {
		return nil, e.storeErr(err, "threads")
	}
	return page, nil
}

// DeleteThread removes a thread, its log and its runs. Its subscriptions
// end; runs on it can no longer append.
//
// From its start until it returns, the thread is not_found to every
// caller of this engine: no load of it starts, and a load in flight is
// dropped instead of kept. So once it returns nothing of the deleted
// thread is in memory, and a thread created again with its ID starts
// empty.
func (e *Engine) DeleteThread(ctx context.Context, id string) error {
	if !tether.ValidID(id) {
		return notFound(id)
	}
	e.mu.Lock()
	e.deleting[id]++
	e.delGen(id).Add(1)
	t := e.threads[id]
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		if e.deleting[id]--; e.deleting[id] == 0 {
			delete(e.deleting, id)
		}
		close(e.delDone)
		e.delDone = make(chan struct{})
		e.mu.Unlock()
	}()
	if t != nil {
		// A loading entry has nothing queued; its load sees it was dropped.
		if t.loaded() {
			t.wmu.Lock()
			t.deleted = true
			for t.flushing {
				t.idle.Wait()
			}
			t.wmu.Unlock()
		}
		e.forget(t) // its runs leave the run index with it
	}
	err := e.st.DeleteThread(ctx, id)
	e.hub.CloseThread(id)
	if err != nil {
		return e.storeErr(err, "thread %s", id)
	}
	// Its pending runs leave the line now, while no run of a thread made
	// again with its ID can exist yet (creates wait for this delete).
	e.queue.removeThread(id)
	return nil
}

// afterDeletes waits until no delete of the thread is in flight. To a
// request that comes while one is, the thread does not exist (see
// DeleteThread): a create must follow the delete and make the thread
// anew, not find the one being deleted and answer with it.
func (e *Engine) afterDeletes(ctx context.Context, id string) error {
	for {
		e.mu.Lock()
		n, done := e.deleting[id], e.delDone
		e.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		case <-e.closing:
			return errClosed
		}
	}
}

// FinalAnswer returns the text of the last assistant message of a run of a
// thread (the latest run if runID is empty).
func (e *Engine) FinalAnswer(ctx context.Context, threadID, runID string) (*tether.FinalAnswer, error) {
	t, err := e.thread(ctx, threadID)
	if err != nil {
		return nil, err
	}
	fa, ok := t.snapshotState().FinalAnswer(runID)
	if !ok {
		return nil, tether.Errorf(tether.CodeNotFound, "run %s not found in thread %s", clip.ID(runID), threadID)
	}
	return fa, nil
}

// MaxMetadataBytes bounds the metadata of a thread, a run and a run's
// input message, as compact JSON: a page of the thread listing holds up to
// 1000 threads, so that without a bound (other than the request body's,
// 4 MiB) one page could be gigabytes. Metadata stored before the bound
// existed still loads and lists.
const MaxMetadataBytes = 64 << 10

// checkMetadataSize refuses compact metadata over MaxMetadataBytes.
func checkMetadataSize(compact json.RawMessage, field string) error {
	if len(compact) > MaxMetadataBytes {
		return tether.Errorf(tether.CodeBadRequest, "%s is %d bytes of JSON; the limit is %d", field, len(compact), MaxMetadataBytes)
	}
	return nil
}

// compactObject returns metadata compacted, or {} when empty.
func compactObject(m json.RawMessage) json.RawMessage {
	if len(m) == 0 || string(m) == "null" {
		return json.RawMessage(`{}`)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, m); err != nil {
		return m
	}
	return buf.Bytes()
}

// sameJSON reports whether two JSON documents are equal as values.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}
