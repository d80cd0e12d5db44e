package hub

import (
	tether "github.com/tetherhq/tether"
)

// ring holds the most recent records of a thread. It is contiguous: once
// initialised it holds every record of the log after base, up to last, so a
// cursor it covers can be served without reading the store.
type ring struct {
	buf   []*tether.Record // circular, grown on demand up to the record limit
	head  int              // index in buf of the oldest record
	n     int              // number of records held
	bytes int              // sum of Record.Size of the records held

	init bool          // base and last are known
	base tether.Offset // every record after base (and none before) is held
	last tether.Offset // offset of the last record published
}

// at returns the i-th oldest record.
func (r *ring) at(i int) *tether.Record {
	j := r.head + i
	if j >= len(r.buf) { // cheaper than %
		j -= len(r.buf)
	}
	return r.buf[j]
}

// reset empties the ring and restarts it after offset base.
func (r *ring) reset(base tether.Offset) {
	for i := 0; i < r.n; i++ {
		r.buf[(r.head+i)%len(r.buf)] = nil
	}
	r.head, r.n, r.bytes = 0, 0, 0
	r.init, r.base, r.last = true, base, base
}

// drop releases the ring's memory; the ring is then uninitialised.
func (r *ring) drop() {
	*r = ring{}
}

// push appends rec, then drops the oldest records until at most maxN
// records and maxBytes bytes are held.
func (r *ring) push(rec *tether.Record, maxN, maxBytes int) {
	if r.n == len(r.buf) {
		if len(r.buf) < maxN {
			r.grow(min(max(2*len(r.buf), 16), maxN))
		} else {
			r.dropOldest()
		}
	}
	r.buf[(r.head+r.n)%len(r.buf)] = rec
	r.n++
	r.bytes += rec.Size()
	r.last = rec.Offset
	for r.n > 0 && r.bytes > maxBytes {
		r.dropOldest()
	}
}

func (r *ring) grow(size int) {
	buf := make([]*tether.Record, size)
	for i := 0; i < r.n; i++ {
		buf[i] = r.at(i)
	}
	r.buf, r.head = buf, 0
}

func (r *ring) dropOldest() {
	rec := r.buf[r.head]
	r.buf[r.head] = nil
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	r.bytes -= rec.Size()
	r.base = rec.Offset
}

// find returns the index of the first record after offset after, if the
// ring covers after: after is base or the offset of a record held. A cursor
// the ring does not cover (older than base, unknown to the thread, or the
// ring is not initialised) is left to the store, which knows whether it is
// valid.
func (r *ring) find(after tether.Offset) (int, bool) {
	if !r.init {
		return 0, false
	}
	if after == r.base {
		return 0, true
	}
	lo, hi := 0, r.n // binary search: the first record not before after
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if r.at(mid).Offset.Compare(after) < 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < r.n && r.at(lo).Offset == after {
		return lo + 1, true
	}
	return 0, false
}
