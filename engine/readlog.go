package engine

import (
	"context"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
)

// ReadLog returns a page of a thread's log after offset after
// (tether.OffsetStart: from its first event), in order, read from the
// store: up to limit records and, past the first, up to logPageBytes of
// them (one larger record comes whole); more is false only when the page
// reaches the end of the log, so a page cut short by its bytes is not
// taken for the end. It is for a reader that goes through a long log at
// its own pace (a projection folding a run up to a cursor): a
// subscription takes in what is appended meanwhile, and would be cut as
// too slow (hub.ErrSlow) by a log long enough. It returns not_found for an
// unknown thread and bad_request for an offset that is not in its log.
func (e *Engine) ReadLog(ctx context.Context, threadID string, after tether.Offset, limit int) (recs []*tether.Record, more bool, err error) {
	if e.closed.Load() {
		return nil, false, errClosed
	}
	if !tether.ValidID(threadID) {
		return nil, false, notFound(threadID)
	}
	recs, more, err = e.st.ReadPage(ctx, threadID, after, limit, logPageBytes)
	if err != nil {
		return nil, false, e.storeErr(err, "thread %s", clip.ID(threadID))
	}
	return recs, more, nil
}

// logPageBytes bounds the bytes of a page of ReadLog, as the hub's
// HistoryBytes bounds a catch-up's: what a fold holds while it reads a log
// of large events.
const logPageBytes = 1 << 20
