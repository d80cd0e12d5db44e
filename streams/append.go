package streams

import (
	"context"
	"strings"
	"unicode/utf8"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
	"github.com/tetherhq/tether/store"
)

// Producer is an idempotent producer's append: Producer-Id, -Epoch and
// -Seq.
type Producer struct {
	ID    string
	Epoch int64
	Seq   int64
}

// AppendRequest is a POST.
type AppendRequest struct {
	Path string
	// ContentType must match the stream's (ignored for a close without
	// data).
	ContentType string
	// Body is the data; it may be empty only with Close.
	Body []byte
	// Close closes the stream after Body.
	Close bool
	// Seq, if set, must sort after the last Stream-Seq accepted (as bytes).
	Seq string
	// Producer, if set, makes the append idempotent.
	Producer *Producer
}

// AppendResult is the outcome of an append.
type AppendResult struct {
	// Tail is the stream's tail after the append (Stream-Next-Offset).
	Tail string
	// Closed says the stream is closed.
	Closed bool
	// Duplicate says the producer's append was already in the stream:
	// nothing was written.
	Duplicate bool
	// Producer is the producer's epoch and the highest sequence number
	// accepted, for an append with a producer.
	Producer *Producer
}

// Append appends to a stream (and closes it, with Close). A Stream-Seq
// that is not UTF-8 is a bad request. The checks then run in this order:
// the stream (not_found, gone), the body (bad_request for
// an empty one, a missing or malformed content type or invalid JSON;
// conflict for another content type), the producer (forbidden for a stale
// epoch, bad_request for a new epoch that does not start at 0, a
// duplicate is success with nothing written, conflict for a gap), the
// stream's closure (conflict, Closed set; a close of a closed stream
// without a producer is a success), then Stream-Seq (conflict). The
// events, the producer's state and the stream's metadata are committed
// together.
func (s *Service) Append(ctx context.Context, req AppendRequest) (*AppendResult, error) {
	if err := checkWritable(req.Path); err != nil {
		return nil, err
	}
	if req.Producer != nil {
		if err := req.Producer.check(); err != nil {
			return nil, err
		}
	}
	if !utf8.ValidString(req.Seq) {
		// It is kept in the stream's metadata, JSON, which would keep
		// another with its invalid bytes replaced: then compared with
		// what it no longer is.
		return nil, errorf(CodeBadRequest, "Stream-Seq must be UTF-8")
	}
	id := threadID(req.Path)
	var (
		res      *AppendResult
		release  string
		appended bool
	)
	err := s.locked(ctx, id, func(e *entry, v *view) error {
		res, release, appended = nil, "", false
		if !v.exists {
			return errorf(CodeNotFound, "stream not found")
		}
		if v.meta.Deleted {
			return errorf(CodeGone, "the stream was deleted")
		}
		expired, err := s.expired(ctx, id, v)
		if err != nil {
			return err
		}
		if expired {
			var kept bool
			if release, kept, err = s.remove(ctx, e, v); err != nil {
				return err
			}
			if kept {
				return errorf(CodeGone, "the stream expired")
			}
			return errorf(CodeNotFound, "stream not found")
		}
		res, appended, err = s.append(ctx, e, v, req)
		return err
	})
	s.release(ctx, release)
	if err != nil {
		return nil, err
	}
	if appended && s.opts.OnAppend != nil {
		s.opts.OnAppend(req.Path)
	}
	return res, nil
}

// append does an Append with the stream's write lock held.
func (s *Service) append(ctx context.Context, e *entry, v *view, req AppendRequest) (*AppendResult, bool, error) {
	closeOnly := len(req.Body) == 0 && req.Close
	if len(req.Body) == 0 && !req.Close {
		return nil, false, errorf(CodeBadRequest, "an append needs a body (or Stream-Closed: true)")
	}
	jsonMode := IsJSON(v.meta.ContentType)
	var msgs jsonMessages
	if !closeOnly {
		switch {
		case req.ContentType == "":
			return nil, false, errorf(CodeBadRequest, "an append needs a Content-Type")
		case mediaType(req.ContentType) == "":
			return nil, false, errorf(CodeBadRequest, "Content-Type %q is malformed", clip.String(req.ContentType, 64))
		case !sameMediaType(req.ContentType, v.meta.ContentType):
			return nil, false, errorf(CodeConflict, "the stream's content type is %s", v.meta.ContentType)
		}
		if jsonMode {
			var err error
			if msgs, err = parseJSONBody(req.Body, false); err != nil {
				return nil, false, err
			}
		}
	}
	tail := wire(v.tailPos())
	var producers []store.Producer
	if p := req.Producer; p != nil {
		cur, err := s.producer(ctx, e, p.ID)
		if err != nil {
			return nil, false, err
		}
		dup, next, err := checkProducer(cur, *p)
		if err != nil {
			if pe, ok := err.(*Error); ok {
				pe.Closed, pe.Tail = v.meta.Closed, tail
			}
			return nil, false, err
		}
		if dup {
			return &AppendResult{Tail: tail, Closed: v.meta.Closed, Duplicate: true,
				Producer: &Producer{ID: p.ID, Epoch: p.Epoch, Seq: cur.Seq}}, false, nil
		}
		producers = append(producers, *next)
	}
	if v.meta.Closed {
		if closeOnly && req.Producer == nil {
			s.touch(e.id, v, true)
			return &AppendResult{Tail: tail, Closed: true}, false, nil
		}
		return nil, false, &Error{Code: CodeConflict, Message: "the stream is closed", Closed: true, Tail: tail}
	}
	m := v.meta
	if req.Seq != "" {
		if m.Seq != "" && req.Seq <= m.Seq {
			return nil, false, errorf(CodeConflict, "Stream-Seq %q does not sort after the last one, %q", clip.String(req.Seq, 64), clip.String(m.Seq, 64))
		}
		m.Seq = req.Seq
	}
	now := s.now()
	var evs []*tether.Event
	if !closeOnly {
		evs = dataEvents(now, msgs, req.Body, jsonMode, s.opts.ChunkBytes)
	}
	if req.Close {
		m.Closed = true
		evs = append(evs, &tether.Event{Type: EventClose, TS: now})
	}
	nv, _, err := s.commit(ctx, e, v, m, evs, producers)
	if err != nil {
		return nil, false, err
	}
	s.touch(e.id, nv, false)
	res := &AppendResult{Tail: wire(nv.tailPos()), Closed: nv.meta.Closed}
	if p := req.Producer; p != nil {
		res.Producer = &Producer{ID: p.ID, Epoch: p.Epoch, Seq: p.Seq}
	}
	return res, true, nil
}

// MaxProducerNumber is the largest producer epoch or sequence number
// (2^53-1, which JavaScript clients hold exactly).
const MaxProducerNumber = 1<<53 - 1

func (p *Producer) check() error {
	switch {
	case p.ID == "" || len(p.ID) > 255:
		return errorf(CodeBadRequest, "Producer-Id must be 1 to 255 bytes")
	case strings.ContainsFunc(p.ID, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return errorf(CodeBadRequest, "Producer-Id must not contain control characters")
	case p.Epoch < 0 || p.Epoch > MaxProducerNumber:
		return errorf(CodeBadRequest, "Producer-Epoch must be an integer from 0 to 2^53-1")
	case p.Seq < 0 || p.Seq > MaxProducerNumber:
		return errorf(CodeBadRequest, "Producer-Seq must be an integer from 0 to 2^53-1")
	}
	return nil
}

// checkProducer applies the Durable Streams producer rules to an append by
// p given the producer's state cur (nil if it never appended). It returns
// dup for an append already in the stream, else the state to commit.
func checkProducer(cur *store.Producer, p Producer) (dup bool, next *store.Producer, err error) {
	switch {
	case cur == nil && p.Seq != 0:
		return false, nil, &Error{Code: CodeConflict, Message: "a new producer must start at Producer-Seq 0",
			Producer: &ProducerRefusal{ExpectedSeq: 0, ReceivedSeq: p.Seq}}
	case cur == nil:
	case p.Epoch < cur.Epoch:
		return false, nil, &Error{Code: CodeForbidden, Message: "Producer-Epoch is stale",
			Producer: &ProducerRefusal{Epoch: cur.Epoch}}
	case p.Epoch > cur.Epoch && p.Seq != 0:
		return false, nil, errorf(CodeBadRequest, "a new Producer-Epoch must start at Producer-Seq 0")
	case p.Epoch > cur.Epoch:
	case p.Seq <= cur.Seq:
		return true, nil, nil
	case p.Seq > cur.Seq+1:
		return false, nil, &Error{Code: CodeConflict, Message: "Producer-Seq leaves a gap",
			Producer: &ProducerRefusal{ExpectedSeq: cur.Seq + 1, ReceivedSeq: p.Seq}}
	}
	return false, &store.Producer{Key: p.ID, Epoch: p.Epoch, Seq: p.Seq}, nil
}

// Delete deletes a stream. A stream that forks still read is only marked
// deleted (it answers gone) and removed with its last fork. It returns
// not_found for an unknown stream, gone for one already deleted, and
// read_only for a thread log.
func (s *Service) Delete(ctx context.Context, path string) error {
	if err := checkWritable(path); err != nil {
		return err
	}
	id := threadID(path)
	var release string
	err := s.locked(ctx, id, func(e *entry, v *view) error {
		release = ""
		if !v.exists {
			return errorf(CodeNotFound, "stream not found")
		}
		if v.meta.Deleted {
			return errorf(CodeGone, "the stream was deleted")
		}
		expired, err := s.expired(ctx, id, v)
		if err != nil {
			return err
		}
		if release, _, err = s.remove(ctx, e, v); err != nil {
			return err
		}
		if expired {
			return errorf(CodeNotFound, "stream not found")
		}
		return nil
	})
	s.release(ctx, release)
	return err
}
