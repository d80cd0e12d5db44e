package durablestreams

import (
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
// served again to the same client.
func (h *Handler) cursor(client string) string {
	iv := h.opts.CursorInterval
	cur := int64(h.opts.Now().Sub(cursorEpoch) / iv)
	c, err := strconv.ParseInt(client, 10, 64)
	if client == "" || err != nil || c < cur {
		return strconv.FormatInt(cur, 10)
	}
	jitter := time.Duration(1+rand.IntN(3600)) * time.Second
	return strconv.FormatInt(c+max(1, int64((jitter+iv-1)/iv)), 10)
}
