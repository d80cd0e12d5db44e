package streams

import (
	"bytes"
	"context"
	"fmt"

	tether "github.com/tetherhq/tether"
)

// CatchUp is a catch-up read of a stream: everything from an offset up to
// an end decided before any of it is sent (the tail, or the last whole
// append within Options.CatchUpBytes), so that the answer's headers
// (Stream-Next-Offset, Stream-Up-To-Date, ETag, Content-Length) can be
// written first. Its data is then delivered a page at a time by Each, as
// it is read from the store: a read of any size holds about
// Options.ReadBytes in memory, never the whole stream.
//
// Durable Streams clients read a catch-up (live: false) as one answer, so
// one answer reaches the tail unless the stream holds more than
// CatchUpBytes after the offset.
type CatchUp struct {
	Info
	// JSON says the items are JSON messages (a JSON stream or a thread
	// log); else they are byte chunks to concatenate.
	JSON bool
	// Next is the offset after the read (Stream-Next-Offset).
	Next string
	// UpToDate says the read reaches the tail.
	UpToDate bool
	// Closed says the read reaches the end of a closed stream.
	Closed bool
	// Chunks is how many chunks Each delivers, and Bytes their total size:
	// what an answer's Content-Length is made of (see Each).
	Chunks int
	Bytes  int64

	s    *Service
	src  *source
	head [][]byte // the first chunks, read while the end was decided
	rest *cursor  // where reading goes on after head; nil if head is all
	end  position // the last position of the read
	// restChunks and restBytes are what follows head, as the end was
	// decided: Each checks that it reads the same again.
	restChunks int
	restBytes  int64
}

// CatchUp starts a catch-up read of a stream from offset ("-1" or empty:
// the start; "now": the tail, no data). It reads up to the end of the
// read, keeping the first Options.ReadBytes or so and only counting the
// rest, which Each reads again. It extends the stream's TTL, and returns
// the errors of Read.
func (s *Service) CatchUp(ctx context.Context, path, offset string) (*CatchUp, error) {
	src, c, err := s.startRead(ctx, path, offset)
	if err != nil {
		return nil, err
	}
	cu := &CatchUp{Info: src.info, JSON: src.jsonMode, s: s, src: src}
	if c == nil {
		cu.Next, cu.UpToDate, cu.Closed = wire(src.tail), true, src.closed
		return cu, nil
	}
	p := c.after
	pg := pager{max: s.opts.ReadBytes}
	next, sawClose, buffering := p, false, true
	// seg and prev say where each record is: its segment, and the
	// position before it there (where a cursor that reads it again
	// starts).
	seg, prev := c.i, p
	// whole is the read as of the end of the last whole append read:
	// where the bound ends it (see appendBound).
	bound := appendBound{max: s.opts.CatchUpBytes}
	whole := catchUpMark{next: p}
	for {
		recs, done, err := pg.next(ctx, s, c)
		if err != nil {
			return nil, err
		}
		if c.i != seg {
			seg, prev = c.i, tether.OffsetStart
		}
		own := c.i == len(src.segs)-1
		for _, r := range recs {
			n, continues, err := src.chunkSize(r)
			if err != nil {
				return nil, unreadable(err)
			}
			if !bound.fits(n) {
				whole.restore(cu)
				return cu, nil
			}
			if buffering && cu.Bytes+n > int64(s.opts.ReadBytes) && next != p {
				// Enough in memory: the rest is only counted now, and
				// read again by Each.
				buffering = false
				cu.rest = &cursor{segs: src.segs, i: seg, after: prev}
			}
			if n > 0 {
				cu.Chunks++
				cu.Bytes += n
				if buffering {
					ch, err := src.chunk(r)
					if err != nil {
						return nil, unreadable(err)
					}
					cu.head = append(cu.head, ch)
				} else {
					cu.restChunks++
					cu.restBytes += n
				}
			}
			next, prev = r.Offset, r.Offset
			if r.Type == EventClose && src.v != nil && own {
				sawClose = true
			}
			if bound.add(n, continues) {
				whole = catchUpMark{next: next, chunks: cu.Chunks, bytes: cu.Bytes, head: len(cu.head),
					rest: cu.rest, restChunks: cu.restChunks, restBytes: cu.restBytes}
			}
		}
		if done {
			break
		}
	}
	cu.Next, cu.end, cu.UpToDate = wire(next), next, true
	cu.Closed = sawClose || src.closed && next == src.tail
	return cu, nil
}

// catchUpMark is a CatchUp as of a position it read: where a bounded read
// goes back to.
type catchUpMark struct {
	next         position
	chunks, head int
	bytes        int64
	rest         *cursor
	restChunks   int
	restBytes    int64
}

// restore ends cu at the mark: what it read after it is not part of the
// answer (Each reads no further than cu.end).
func (m catchUpMark) restore(cu *CatchUp) {
	cu.Next, cu.end = wire(m.next), m.next
	cu.Chunks, cu.Bytes = m.chunks, m.bytes
	cu.head = cu.head[:m.head]
	cu.rest, cu.restChunks, cu.restBytes = m.rest, m.restChunks, m.restBytes
}

// Each calls fn with the data of the read, in order, in chunks, a page of
// them at a time (a page is about Options.ReadBytes); fn must not keep
// them. A chunk is never empty. For a byte stream, the chunks are bytes
// to concatenate. For a JSON stream or a thread log, each chunk is one or
// more JSON messages separated by commas (a part of a JSON array, without
// its brackets): the read's array is "[", the chunks joined by ",", "]".
// So the data is written as stored, without splitting it into messages.
//
// Each returns fn's error, or the store's, or an unavailable error if the
// stream no longer holds what CatchUp counted (it was deleted, and maybe
// created again, meanwhile): the caller then ends its answer short, never
// passing a part off as the whole.
func (cu *CatchUp) Each(ctx context.Context, fn func(chunks [][]byte) error) error {
	if len(cu.head) > 0 {
		if err := fn(cu.head); err != nil {
			return err
		}
	}
	if cu.rest == nil {
		return nil
	}
	s, c := cu.s, cu.rest
	pg := pager{max: s.opts.ReadBytes}
	chunks, nbytes := 0, int64(0)
	for {
		recs, done, err := pg.next(ctx, s, c)
		if err != nil {
			return err
		}
		var page [][]byte
		reached := false
		for _, r := range recs {
			if before(cu.end, r.Offset) {
				return changed()
			}
			ch, err := cu.src.chunk(r)
			if err != nil {
				return unreadable(err)
			}
			if len(ch) > 0 {
				page = append(page, ch)
				chunks++
				nbytes += int64(len(ch))
			}
			if r.Offset == cu.end {
				reached = true
				break
			}
		}
		if chunks > cu.restChunks || nbytes > cu.restBytes {
			return changed()
		}
		if len(page) > 0 {
			if err := fn(page); err != nil {
				return err
			}
		}
		if reached {
			if chunks != cu.restChunks || nbytes != cu.restBytes {
				return changed()
			}
			return nil
		}
		if done {
			return changed()
		}
	}
}

// chunk returns the data a record holds for a catch-up read (see Each):
// for a thread log, the event; for a JSON stream, the inside of the array
// of its messages; for a byte stream, its bytes. Events without data give
// none.
func (src *source) chunk(r *tether.Record) ([]byte, error) {
	switch {
	case src.v == nil:
		return r.Data, nil
	case r.Type != EventData:
		return nil, nil
	}
	d, err := eventData(r)
	if err != nil {
		return nil, err
	}
	if !src.jsonMode {
		return decodeBytes(r, d)
	}
	d = bytes.TrimSpace(d)
	if len(d) < 2 || d[0] != '[' || d[len(d)-1] != ']' {
		return nil, fmt.Errorf("decode event %s: the data is not a JSON array", r.Offset)
	}
	return bytes.TrimSpace(d[1 : len(d)-1]), nil
}

// chunkSize returns the size of what chunk returns, without decoding
// bytes, and whether the record is a piece of an append that continues in
// the next one (statusContinues).
func (src *source) chunkSize(r *tether.Record) (int64, bool, error) {
	if src.v == nil || r.Type != EventData {
		c, err := src.chunk(r)
		return int64(len(c)), false, err
	}
	d, continues, err := eventPiece(r)
	if err != nil {
		return 0, false, err
	}
	if !src.jsonMode {
		n, err := decodedLen(r, d)
		return int64(n), continues, err
	}
	c, err := src.chunk(r)
	return int64(len(c)), continues, err
}

func unreadable(err error) error {
	return &Error{Code: CodeUnavailable, Message: "a stored event is unreadable", cause: err}
}

func changed() error {
	return errorf(CodeUnavailable, "the stream changed during the read (it was deleted); read it again")
}
