package streams

import (
	"context"
	"net/url"
	"strings"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// forkPlan is a fork worked out against its source, whose write lock it
// holds (so the source cannot be removed before the fork takes its
// reference) until unlock.
type forkPlan struct {
	source string
	offset tether.Offset // "" for the start
	// sourceInc and sourceCreated name the source's incarnation.
	sourceInc     string
	sourceCreated tether.Time
	chain         []segment
	contentType   string
	ttl           *int64
	expiresAt     *int64
	// prefix, if set, makes the events of the sub-offset part: the first
	// bytes or messages of the append after offset.
	prefix func(now tether.Time, jsonMode bool, chunk int) []*tether.Event
	unlock func()
}

// SourcePath returns the stream path a Stream-Forked-From header names: a
// path under /v1/stream/, or a URL whose path is. The path is
// percent-decoded, as a request's is before it names a stream, so that a
// stream's URL (its Location) names it whatever its name holds; a value
// that is not a valid escape is taken as it is.
func SourcePath(header string) string {
	p := header
	if i := strings.Index(p, "://"); i >= 0 {
		p = p[i+3:]
		if j := strings.IndexByte(p, '/'); j >= 0 {
			p = p[j:]
		} else {
			p = ""
		}
	}
	if k := strings.IndexAny(p, "?#"); k >= 0 {
		p = p[:k]
	}
	if d, err := url.PathUnescape(p); err == nil {
		p = d
	}
	p = strings.TrimPrefix(p, "/v1/stream/")
	return strings.TrimPrefix(p, "/")
}

// forkSourceID returns the stream a create forks, if it names one that
// can be (planFork says why not).
func forkSourceID(req CreateRequest) (string, bool) {
	if req.ForkedFrom == "" {
		return "", false
	}
	src := SourcePath(req.ForkedFrom)
	if checkPath(src) != nil {
		return "", false
	}
	if _, ok := threadLog(src); ok {
		return "", false
	}
	sid := threadID(src)
	return sid, sid != threadID(req.Path)
}

// planFork checks a fork of req.ForkedFrom into the stream target and
// locks the source, unless held is the source's entry, locked by the
// caller (see createInOrder: the source's lock comes first when its ID
// sorts before the fork's). The caller must call unlock.
func (s *Service) planFork(ctx context.Context, target string, req CreateRequest, held *entry) (*forkPlan, error) {
	src := SourcePath(req.ForkedFrom)
	if err := checkPath(src); err != nil {
		return nil, err
	}
	if _, ok := threadLog(src); ok {
		return nil, errorf(CodeBadRequest, "thread logs cannot be forked")
	}
	sid := threadID(src)
	if sid == target {
		return nil, errorf(CodeBadRequest, "a stream cannot be forked into itself")
	}
	e, unlock := held, func() {}
	if e == nil {
		e = s.lockEntry(sid)
		unlock = e.wmu.Unlock
	}
	p, err := s.planForkLocked(ctx, e, req)
	if err != nil {
		unlock()
		return nil, err
	}
	p.unlock = unlock
	return p, nil
}

func (s *Service) planForkLocked(ctx context.Context, e *entry, req CreateRequest) (*forkPlan, error) {
	v, err := s.ensure(ctx, e)
	if err != nil {
		return nil, err
	}
	if !v.exists {
		return nil, errorf(CodeNotFound, "the source stream does not exist")
	}
	if v.meta.Deleted {
		return nil, errorf(CodeConflict, "the source stream was deleted")
	}
	expired, err := s.expired(ctx, e.id, v)
	if err != nil {
		return nil, err
	}
	if expired {
		// Expiring it here would need its parent's lock too; let the
		// sweeper or its next reader do it.
		return nil, errorf(CodeNotFound, "the source stream does not exist")
	}
	if req.ContentType != "" && !sameMediaType(req.ContentType, v.meta.ContentType) {
		return nil, errorf(CodeConflict, "the content type differs from the source's")
	}
	if len(v.chain)+1 > maxForkDepth {
		return nil, errorf(CodeBadRequest, "the source is a fork %d deep: forks of forks nest at most %d deep", len(v.chain), maxForkDepth)
	}
	p := &forkPlan{source: e.id, sourceInc: v.meta.Inc, sourceCreated: v.created,
		contentType: v.meta.ContentType, ttl: v.meta.TTL, expiresAt: v.meta.ExpiresAt}
	segs := v.segments(e.id)
	at := v.tailPos()
	if req.ForkOffset != "" {
		pos, ok, err := parsePosition(req.ForkOffset)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errorf(CodeBadRequest, "Stream-Fork-Offset is not a position of the source stream")
		}
		if _, err := s.locate(ctx, segs, pos); err != nil {
			if CodeOf(err) == CodeGone || CodeOf(err) == CodeBadRequest {
				return nil, errorf(CodeBadRequest, "Stream-Fork-Offset is not a position of the source stream")
			}
			return nil, err
		}
		at = pos
	}
	if at.IsEvent() {
		p.offset = at
	}
	p.chain = append(cut(v.chain, at), segment{thread: e.id, upto: at})
	if req.ForkSubOffset > 0 {
		jsonMode := IsJSON(v.meta.ContentType)
		items, err := s.appendPrefix(ctx, segs, at, jsonMode, req.ForkSubOffset)
		if err != nil {
			return nil, err
		}
		if jsonMode {
			msgs := joinMessages(items)
			p.prefix = func(now tether.Time, jsonMode bool, chunk int) []*tether.Event {
				return dataEvents(now, msgs, nil, true, chunk)
			}
		} else {
			data := items[0]
			p.prefix = func(now tether.Time, jsonMode bool, chunk int) []*tether.Event {
				return dataEvents(now, nil, data, false, chunk)
			}
		}
	}
	return p, nil
}

// appendPrefix returns the first n items of the append after position at:
// n messages of a JSON stream, else one slice of its first n bytes. An
// append stored in several events (over Options.ChunkBytes) is read on
// across them while each is marked to continue (statusContinues) and the
// next is in the same log: a chain that inherits only the first pieces of
// an append (a fork at a position inside it) sees those as the append.
// Pieces stored before they were marked each read as an append of their
// own. Of the append it keeps no more than n items (or bytes).
func (s *Service) appendPrefix(ctx context.Context, segs []segment, at position, jsonMode bool, n int64) ([][]byte, error) {
	c, err := s.cursorAt(ctx, segs, at)
	if err != nil {
		return nil, err
	}
	var (
		out      [][]byte // JSON messages, or the bytes as one slice
		total    int64    // messages, or bytes, of the append read so far
		started  bool     // the append's first piece was read
		more     bool     // the last piece read continues in the next event
		startSeg int      // the segment of the append's pieces
	)
	for {
		recs, done, err := s.nextRecords(ctx, c, 4) // a few pieces (chunks) at a time
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if started && (!more || c.i != startSeg || r.Type != EventData) {
				return nil, pastAppend(total, jsonMode)
			}
			if r.Type != EventData {
				continue
			}
			items, continues, err := decodePiece(r, jsonMode)
			if err != nil {
				return nil, &Error{Code: CodeUnavailable, Message: "a stored event is unreadable", cause: err}
			}
			if !started && len(items) == 0 {
				continue
			}
			started, more, startSeg = true, continues, c.i
			if jsonMode {
				k := min(int64(len(items)), n-total)
				out = append(out, items[:k]...)
				total += int64(len(items))
			} else {
				b := items[0]
				if len(out) == 0 {
					out = [][]byte{nil}
				}
				out[0] = append(out[0], b[:min(int64(len(b)), n-total)]...)
				total += int64(len(b))
			}
			if total >= n {
				return out, nil
			}
		}
		if done {
			if started {
				return nil, pastAppend(total, jsonMode)
			}
			return nil, errorf(CodeBadRequest, "Stream-Fork-Sub-Offset names data after the source's tail")
		}
	}
}

// pastAppend is the error of a sub-offset past the end of the append of
// total messages or bytes.
func pastAppend(total int64, jsonMode bool) error {
	if jsonMode {
		return errorf(CodeBadRequest, "Stream-Fork-Sub-Offset is past the %d messages of the append", total)
	}
	return errorf(CodeBadRequest, "Stream-Fork-Sub-Offset is past the %d bytes of the append", total)
}

// storeBatch is the batch that creates a stream.
func storeBatch(id string, row *tether.Thread, evs []*tether.Event, enc [][]byte) *store.Batch {
	return &store.Batch{ThreadID: id, Create: true, Thread: row, Events: evs, Encoded: enc}
}
