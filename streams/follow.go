package streams

import (
	"context"
	"errors"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/hub"
)

// Follower delivers what is appended to a stream after a position, as it
// is committed. Create one with Follow; Close it when done.
type Follower struct {
	s       *Service
	src     *source
	sub     *hub.Subscriber
	pos     position // last position delivered (in the stream's own log, or before it)
	deleted bool     // the stream's deletion was seen: nothing follows
}

// Batch is what a Follower delivers at once.
type Batch struct {
	// Items are JSON messages (JSON streams, thread logs) or byte chunks.
	Items [][]byte
	// Next is the offset after them: the end of an append, never a
	// position between the pieces of a large one.
	Next string
	// Closed says the stream was closed: nothing follows.
	Closed bool
	// More says more is already known to follow (the follower fell
	// behind and reads the log a page at a time): the batch does not
	// reach the tail, and a reader must not say it is up to date.
	More bool
}

// Follow follows a stream from offset after, which must be its tail as a
// Read (UpToDate) or an append returned, or "now". New data arrives in
// the stream's own log only (what a fork inherits never changes), so
// Follow subscribes to that log in the hub. It returns the errors of Read.
func (s *Service) Follow(ctx context.Context, path, after string) (*Follower, error) {
	src, err := s.openRead(ctx, path)
	if err != nil {
		return nil, err
	}
	p := src.tail
	if after != OffsetNow {
		if p, err = src.position(after); err != nil {
			return nil, err
		}
	}
	i, err := s.locate(ctx, src.segs, p)
	if err != nil {
		return nil, src.offsetErr(after, err)
	}
	if i < len(src.segs)-1 {
		// Before the stream's own log: everything in it is new.
		p = tether.OffsetStart
	}
	return &Follower{s: s, src: src, sub: s.hub.Subscribe(src.id, p), pos: p}, nil
}

// Ready is signalled when Next may not block.
func (f *Follower) Ready() <-chan struct{} { return f.sub.Ready() }

// Next returns the next batch, waiting for one. It returns not_found when
// the stream is deleted, and ctx.Err() when ctx ends.
func (f *Follower) Next(ctx context.Context) (*Batch, error) {
	return f.next(ctx, true)
}

// TryNext is Next without waiting: it returns nil, nil when nothing is
// ready.
func (f *Follower) TryNext(ctx context.Context) (*Batch, error) {
	return f.next(ctx, false)
}

func (f *Follower) next(ctx context.Context, wait bool) (*Batch, error) {
	b := &Batch{}
	// partial says b ends with a piece of an append that continues
	// (statusContinues): a batch ends at a whole append, as a Read does
	// (see appendBound), never where the hub's page of the log or its
	// buffer did. The rest was committed with the piece, so it is already
	// queued or in the log: reading on does not wait for an append.
	partial := false
	for {
		if f.deleted {
			return nil, errorf(CodeNotFound, "the stream was deleted")
		}
		var (
			recs []*tether.Record
			err  error
		)
		if wait || partial {
			recs, err = f.sub.Next(ctx)
		} else {
			recs, err = f.sub.TryNext(ctx)
		}
		switch {
		case errors.Is(err, hub.ErrSlow):
			// Fell behind: catch up from the log.
			f.sub.Close()
			f.sub = f.s.hub.Subscribe(f.src.id, f.pos)
			continue
		case errors.Is(err, hub.ErrClosed):
			return nil, errorf(CodeNotFound, "the stream was deleted")
		case err != nil:
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, f.s.storeErr(err)
		case len(recs) == 0:
			return nil, nil
		}
		for _, r := range recs {
			if r.Type == EventDeleted && f.src.v != nil {
				// Deleted (maybe on another node): what came before it is
				// delivered, then the follower ends.
				f.deleted = true
				break
			}
			items, continues, err := f.src.piece(r)
			if err != nil {
				return nil, unreadable(err)
			}
			b.Items = append(b.Items, items...)
			f.pos, partial = r.Offset, continues
			if r.Type == EventClose && f.src.v != nil {
				b.Closed = true
			}
		}
		if partial && !f.deleted || f.deleted && len(b.Items) == 0 && !b.Closed {
			continue
		}
		b.Next = wire(f.pos)
		b.More = !f.deleted && !b.Closed && f.sub.Behind()
		if f.src.v != nil {
			f.s.touch(f.src.id, f.src.v, true)
		}
		return b, nil
	}
}

// Close ends the follower.
func (f *Follower) Close() { f.sub.Close() }
