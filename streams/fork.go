package streams

import (
	"context"
	"encoding/json"
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
// path under /v1/stream/, or a URL whose path is.
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
	p = strings.TrimPrefix(p, "/v1/stream/")
	return strings.TrimPrefix(p, "/")
}

// planFork checks a fork of req.ForkedFrom into the stream target and
// locks the source. The caller must call unlock.
func (s *Service) planFork(ctx context.Context, target string, req CreateRequest) (*forkPlan, error) {
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
	e := s.lockEntry(sid)
	p, err := s.planForkLocked(ctx, e, req)
	if err != nil {
		e.wmu.Unlock()
		return nil, err
	}
	p.unlock = e.wmu.Unlock
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
		items, err := s.nextAppend(ctx, segs, at, IsJSON(v.meta.ContentType))
		if err != nil {
			return nil, err
		}
		n := int(req.ForkSubOffset)
		if IsJSON(v.meta.ContentType) {
			if n > len(items) {
				return nil, errorf(CodeBadRequest, "Stream-Fork-Sub-Offset is past the %d messages of the append", len(items))
			}
			msgs := make([]json.RawMessage, n)
			for i := range msgs {
				msgs[i] = items[i]
			}
			p.prefix = func(now tether.Time, jsonMode bool, chunk int) []*tether.Event {
				return dataEvents(now, msgs, nil, true, chunk)
			}
		} else {
			if n > len(items[0]) {
				return nil, errorf(CodeBadRequest, "Stream-Fork-Sub-Offset is past the %d bytes of the append", len(items[0]))
			}
			data := items[0][:n]
			p.prefix = func(now tether.Time, jsonMode bool, chunk int) []*tether.Event {
				return dataEvents(now, nil, data, false, chunk)
			}
		}
	}
	return p, nil
}

// nextAppend returns the items of the first data event after position at.
func (s *Service) nextAppend(ctx context.Context, segs []segment, at position, jsonMode bool) ([][]byte, error) {
	c, err := s.cursorAt(ctx, segs, at)
	if err != nil {
		return nil, err
	}
	for {
		recs, done, err := s.nextRecords(ctx, c, 64)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if r.Type != EventData {
				continue
			}
			items, err := decodeItems(r, jsonMode)
			if err != nil {
				return nil, &Error{Code: CodeUnavailable, Message: "a stored event is unreadable", cause: err}
			}
			if len(items) > 0 {
				return items, nil
			}
		}
		if done {
			return nil, errorf(CodeBadRequest, "Stream-Fork-Sub-Offset names data after the source's tail")
		}
	}
}

// storeBatch is the batch that creates a stream.
func storeBatch(id string, row *tether.Thread, evs []*tether.Event, enc [][]byte) *store.Batch {
	return &store.Batch{ThreadID: id, Create: true, Thread: row, Events: evs, Encoded: enc}
}
