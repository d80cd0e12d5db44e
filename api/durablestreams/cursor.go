package durablestreams

import (
	"math"
	"math/rand/v2"
	"strconv"
	"time"
)

// cursorEpoch is where Stream-Cursor intervals are counted from (the
// protocol's default, so that cursors agree with other servers').
var cursorEpoch = time.Date(2024, 10, 9, 0, 0, 0, 0, time.UTC)

// cursor returns the Stream-Cursor of a live answer (PROTOCOL.md §8.1): the
// number of the current interval, or, when the client's cursor is not
// behind it, the client's plus a random 1 to 3600 seconds' worth of
// intervals, so that cursors never go back and a cached answer is never
// served again to the same client. A client's cursor that cannot move
// forward (within its jitter of the top of int64) was not given by this
// server: it starts again from the current interval, as a cursor that is
// not a number does.
func (h *Handler) cursor(client string) string {
	iv := h.opts.CursorInterval
	cur := int64(h.opts.Now().Sub(cursorEpoch) / iv)
	c, err := strconv.ParseInt(client, 10, 64)
	jitter := time.Duration(1+rand.IntN(3600)) * time.Second
	step := max(1, int64((jitter+iv-1)/iv))
	if client == "" || err != nil || c < cur || c > math.MaxInt64-step {
		return strconv.FormatInt(cur, 10)
	}
	return strconv.FormatInt(c+step, 10)
}
