package streams

// appendBound decides where a bounded read ends: after the last whole
// append within max bytes of data, never between the pieces
// (statusContinues) that an append over Options.ChunkBytes is stored in.
// A read that ended between two pieces would end a text stream inside a
// character, and hand out an offset inside an append, where a fork takes
// part of it and a reader that stops has part of a message. The first
// append a read meets is read whole, whatever its size (from a position
// inside an append, its rest is the first). CatchUp is bounded by
// Options.CatchUpBytes, Read (the pages of live reads) by
// Options.ReadBytes.
type appendBound struct {
	max   int64
	bytes int64 // data read so far
	whole bool  // an append was read to its end: the read can end
}

// fits reports whether a record of n bytes of data may be read: it is
// within the bound, or part of the first append.
func (b *appendBound) fits(n int64) bool { return !b.whole || b.bytes+n <= b.max }

// add counts a record of n bytes of data, and reports whether it ends an
// append: where the read may end.
func (b *appendBound) add(n int64, continues bool) bool {
	b.bytes += n
	b.whole = b.whole || !continues
	return !continues
}

// full reports whether a read at the end of an append has reached the
// bound: only records without data would still fit.
func (b *appendBound) full() bool { return b.whole && b.bytes >= b.max }
