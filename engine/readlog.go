package engine

import (
	"context"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
)

// ReadLog returns up to limit records of a thread's log after offset after
// (tether.OffsetStart: from its first event), in order, read from the
// store. It is for a reader that goes through a long log at its own pace
// (a projection folding a run up to a cursor): a subscription takes in
// what is appended meanwhile, and would be cut as too slow (hub.ErrSlow)
// by a log long enough. It returns not_found for an unknown thread and
// bad_request for an offset that is not in its log.
func (e *Engine) ReadLog(ctx context.Context, threadID string, after tether.Offset, limit int) ([]*tether.Record, error) {
	if e.closed.Load() {
		return nil, errClosed
	}
	if !tether.ValidID(threadID) {
		return nil, notFound(threadID)
	}
	recs, err := e.st.ReadEvents(ctx, threadID, after, limit)
	if err != nil {
		return nil, e.storeErr(err, "thread %s", clip.ID(threadID))
	}
	return recs, nil
}
