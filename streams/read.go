package streams

import (
	"context"
	"errors"
	"strings"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
	"github.com/tetherhq/tether/store"
)

// segments returns where the data of the stream id is: its chain and its
// own log (unbounded: it ends wherever the log ends when it is read).
func (v *view) segments(id string) []segment {
	out := make([]segment, 0, len(v.chain)+1)
	out = append(out, v.chain...)
	return append(out, segment{thread: id})
}

// cursor is a read position across the segments of a stream.
type cursor struct {
	segs  []segment
	i     int      // current segment
	after position // last position read in it
}

// locate returns the segment that holds position p, checking that p is a
// position of the stream: its start, or an event of the segment's log at
// or before the segment's end. It returns a gone error if it is not.
func (s *Service) locate(ctx context.Context, segs []segment, p position) (int, error) {
	if !p.IsEvent() {
		return 0, nil
	}
	for i, sg := range segs {
		last := i == len(segs)-1
		if !last && before(sg.upto, p) {
			continue
		}
		_, err := s.st.ReadEvents(ctx, sg.thread, p, 0)
		switch {
		case err == nil:
			return i, nil
		case errors.Is(err, store.ErrOffsetNotFound):
			return 0, errorf(CodeGone, "offset %s is not a position of this stream", p)
		default:
			return 0, s.storeErr(err)
		}
	}
	return 0, errorf(CodeGone, "offset %s is not a position of this stream", p)
}

// cursorAt returns a cursor that reads what follows position p.
func (s *Service) cursorAt(ctx context.Context, segs []segment, p position) (*cursor, error) {
	i, err := s.locate(ctx, segs, p)
	if err != nil {
		return nil, err
	}
	return &cursor{segs: segs, i: i, after: p}, nil
}

// nextRecords returns up to limit records from c and advances it. done is
// true once the last segment has returned everything it held.
func (s *Service) nextRecords(ctx context.Context, c *cursor, limit int) (recs []*tether.Record, done bool, err error) {
	for {
		sg := c.segs[c.i]
		last := c.i == len(c.segs)-1
		if !last && !before(c.after, sg.upto) {
			c.i++
			c.after = tether.OffsetStart
			continue
		}
		recs, err := s.st.ReadEvents(ctx, sg.thread, c.after, limit)
		if err != nil {
			return nil, false, s.storeErr(err)
		}
		if !last {
			n := 0
			for n < len(recs) && !before(sg.upto, recs[n].Offset) {
				n++
			}
			if n < len(recs) || len(recs) < limit {
				// This segment is done; the next read moves on.
				recs = recs[:n]
				if len(recs) == 0 {
					c.i++
					c.after = tether.OffsetStart
					continue
				}
				c.after = sg.upto
				if n > 0 && recs[n-1].Offset != sg.upto {
					// The segment ends at a position that is not one of
					// its records (it cannot happen: forks inherit up to
					// a position); move on anyway.
					c.after = recs[n-1].Offset
				}
				return recs, false, nil
			}
		}
		if len(recs) > 0 {
			c.after = recs[len(recs)-1].Offset
		}
		return recs, last && len(recs) < limit, nil
	}
}

// pager reads records a page at a time, sized so that a page holds about
// max bytes: records range from a few bytes to a chunk (Options.ChunkBytes)
// or a thread event (up to a MiB), so the number asked for follows the
// size of the records read so far.
type pager struct {
	max          int
	recs, nbytes int64 // records read so far, and their stored size
}

// firstPage is how many records a pager asks for before it knows their
// size.
const firstPage = 16

func (pg *pager) next(ctx context.Context, s *Service, c *cursor) ([]*tether.Record, bool, error) {
	limit := firstPage
	if pg.recs > 0 {
		avg := max(pg.nbytes/pg.recs, 1)
		limit = int(min(max(int64(pg.max)/avg, 1), readPage))
	}
	recs, done, err := s.nextRecords(ctx, c, limit)
	for _, r := range recs {
		pg.recs++
		pg.nbytes += int64(len(r.Data))
	}
	return recs, done, err
}

// source is a readable stream as of one read.
type source struct {
	id       string // its own log
	path     string
	jsonMode bool
	segs     []segment
	tail     position
	closed   bool
	v        *view // nil for thread logs
	info     Info
}

// startRead opens a read of the stream at path from offset: its source
// and a cursor at the offset, or no cursor for "now" (the tail: nothing to
// read). The empty offset reads from the start.
func (s *Service) startRead(ctx context.Context, path, offset string) (*source, *cursor, error) {
	src, err := s.openRead(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	if offset == OffsetNow {
		return src, nil, nil
	}
	if offset == "" {
		offset = OffsetStart
	}
	p, err := src.position(offset)
	if err != nil {
		return nil, nil, err
	}
	c := &cursor{segs: src.segs, after: p}
	if c.i, err = s.locate(ctx, src.segs, p); err != nil {
		return nil, nil, src.offsetErr(offset, err)
	}
	return src, c, nil
}

// openRead opens a stream to read (open) and counts the read against its
// TTL: every read does, whatever it returns.
func (s *Service) openRead(ctx context.Context, path string) (*source, error) {
	src, err := s.open(ctx, path)
	if err != nil {
		return nil, err
	}
	if src.v != nil {
		s.touch(src.id, src.v, true)
	}
	return src, nil
}

// open returns a stream to read, checking that it exists, is not deleted
// and has not expired. Thread logs are read-only JSON streams.
func (s *Service) open(ctx context.Context, path string) (*source, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	if tid, ok := threadLog(path); ok {
		return s.openThread(ctx, path, tid)
	}
	if path == ReservedPrefix || strings.HasPrefix(path, ReservedPrefix+"/") {
		return nil, errorf(CodeNotFound, "stream not found")
	}
	id := threadID(path)
	var v *view
	for attempt := 0; ; attempt++ {
		var err error
		if v, err = s.snapshot(ctx, id); err != nil {
			return nil, err
		}
		if !v.exists {
			return nil, errorf(CodeNotFound, "stream not found")
		}
		if v.meta.Deleted {
			return nil, errorf(CodeGone, "the stream was deleted")
		}
		expired, err := s.expired(ctx, id, v)
		if err != nil {
			return nil, err
		}
		if !expired {
			break
		}
		alive, kept, err := s.expire(ctx, id)
		switch {
		case err != nil:
			return nil, err
		case kept:
			return nil, errorf(CodeGone, "the stream expired")
		case !alive || attempt > 0:
			return nil, errorf(CodeNotFound, "stream not found")
		}
		// Read since, by another node: look again.
	}
	return &source{id: id, path: path, jsonMode: IsJSON(v.meta.ContentType), segs: v.segments(id),
		tail: v.tailPos(), closed: v.meta.Closed, v: v, info: s.info(path, v)}, nil
}

// openThread opens a thread's log as a read-only JSON stream whose
// messages are its events.
func (s *Service) openThread(ctx context.Context, path, tid string) (*source, error) {
	if !tether.ValidID(tid) {
		return nil, errorf(CodeNotFound, "thread not found")
	}
	rec, err := s.st.Thread(ctx, tid)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, errorf(CodeNotFound, "thread not found")
		}
		return nil, s.storeErr(err)
	}
	tail := rec.Thread.LastOffset
	if !tail.IsEvent() {
		tail = tether.OffsetStart
	}
	return &source{id: tid, path: path, jsonMode: true, segs: []segment{{thread: tid}}, tail: tail,
		info: Info{Path: path, ContentType: "application/json", Tail: wire(tail), Created: rec.Thread.CreatedAt.Time, ReadOnly: true}}, nil
}

// piece returns what a record holds for a reader of src, and whether it
// is a piece of an append that continues in the next record.
func (src *source) piece(r *tether.Record) ([][]byte, bool, error) {
	if src.v == nil {
		return [][]byte{r.Data}, false, nil
	}
	return decodePiece(r, src.jsonMode)
}

// Head describes a stream without reading it (and without extending its
// TTL). It returns not_found or gone like Read.
func (s *Service) Head(ctx context.Context, path string) (*Info, error) {
	src, err := s.open(ctx, path)
	if err != nil {
		return nil, err
	}
	return &src.info, nil
}

// ReadResult is what a catch-up read returns.
type ReadResult struct {
	Info
	// JSON says Items are JSON messages (the stream is in JSON mode); else
	// they are byte chunks to concatenate.
	JSON  bool
	Items [][]byte
	// Next is the offset to read from next (Stream-Next-Offset).
	Next string
	// UpToDate says the read reached the tail.
	UpToDate bool
	// Closed says the read reached the end of a closed stream.
	Closed bool
}

// Read returns data of a stream from offset: "-1" (or empty) for the
// start, "now" for the tail (no data), or an offset a previous read or
// append returned. It returns the data up to the tail, or up to the end
// of the last whole append within Options.ReadBytes (a page; the first
// append whole, whatever its size; from a position inside an append, its
// rest), never a part of an append (see appendBound): Next is never a
// position inside one. A read extends the stream's TTL. It returns not_found
// for an unknown stream, gone for a deleted one (forks still read it) or an
// offset that is not a position of the stream, bad_request for a
// malformed offset or one past the tail.
func (s *Service) Read(ctx context.Context, path, offset string) (*ReadResult, error) {
	src, c, err := s.startRead(ctx, path, offset)
	if err != nil {
		return nil, err
	}
	res := &ReadResult{Info: src.info, JSON: src.jsonMode}
	if c == nil {
		res.Next, res.UpToDate, res.Closed = wire(src.tail), true, src.closed
		return res, nil
	}
	// A read ends at the last whole append within Options.ReadBytes
	// (appendBound): mark is the read as of the end of the last whole
	// append read.
	type readMark struct {
		items    int
		next     position
		sawClose bool
	}
	next, sawClose := c.after, false
	bound := appendBound{max: int64(s.opts.ReadBytes)}
	mark := readMark{next: next}
	pg := pager{max: s.opts.ReadBytes}
	for {
		recs, done, err := pg.next(ctx, s, c)
		if err != nil {
			return nil, err
		}
		own := c.i == len(src.segs)-1
		stopped := false
		for i, r := range recs {
			items, continues, err := src.piece(r)
			if err != nil {
				return nil, unreadable(err)
			}
			n := int64(0)
			for _, it := range items {
				n += int64(len(it))
			}
			if !bound.fits(n) {
				clear(res.Items[mark.items:])
				res.Items, next, sawClose = res.Items[:mark.items], mark.next, mark.sawClose
				stopped = true
				break
			}
			res.Items = append(res.Items, items...)
			next = r.Offset
			if r.Type == EventClose && src.v != nil && own {
				sawClose = true
			}
			if bound.add(n, continues) {
				mark = readMark{items: len(res.Items), next: next, sawClose: sawClose}
				if bound.full() && (i < len(recs)-1 || !done) {
					stopped = true
					break
				}
			}
		}
		if stopped {
			break
		}
		if done {
			res.UpToDate = true
			break
		}
	}
	res.Next = wire(next)
	if res.UpToDate && (sawClose || src.closed && next == src.tail) {
		res.Closed = true
	}
	return res, nil
}

// readPage is the most records a read asks the store for at a time (see
// pager).
const readPage = 256

// position parses a client's offset for this stream.
func (src *source) position(offset string) (position, error) {
	p, ok, err := parsePosition(offset)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", src.offsetErr(offset, errorf(CodeGone, "offset %s is not a position of this stream", clip.String(offset, 64)))
	}
	return p, nil
}

// offsetErr refines an offset that is not a position: past the tail it is
// a bad request (no such position was ever given out), before it gone.
func (src *source) offsetErr(offset string, err error) error {
	if CodeOf(err) == CodeGone && offset > wire(src.tail) {
		return errorf(CodeBadRequest, "offset %s is past the tail of this stream", clip.String(offset, 64))
	}
	return err
}
