package streams

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
	"github.com/tetherhq/tether/store"
)

// CreateRequest is a PUT: a new stream, or a fork of one.
type CreateRequest struct {
	// Path names the stream (the part of the URL after /v1/stream/).
	Path string
	// ContentType is the stream's content type; empty means
	// DefaultContentType, or the source's for a fork.
	ContentType string
	// TTL is a sliding time to live in seconds: the stream expires when it
	// has been neither read nor written for that long. ExpiresAt is an
	// absolute expiry. At most one may be set; a fork with neither takes
	// its source's.
	TTL       *int64
	ExpiresAt *time.Time
	// Closed creates the stream closed (after Body).
	Closed bool
	// Body is the initial data.
	Body []byte
	// ForkedFrom, if set, is the path of the stream to fork: the new
	// stream starts with the source's data up to ForkOffset (its tail if
	// empty) and continues on its own. ForkSubOffset, if above 0, also
	// takes that many bytes (or JSON messages) of the append that follows
	// ForkOffset.
	ForkedFrom    string
	ForkOffset    string
	ForkSubOffset int64
}

// Info describes a stream.
type Info struct {
	Path        string
	ContentType string
	// TTL and ExpiresAt are as configured (the TTL is the window, not what
	// remains of it).
	TTL       *int64
	ExpiresAt *time.Time
	Closed    bool
	// Tail is the offset after the last data (Stream-Next-Offset).
	Tail string
	// Created is when the stream was created (what the ETag of its reads
	// starts from, so that a stream created again at the same path never
	// shares one with the old).
	Created time.Time
	// ReadOnly is set for thread logs.
	ReadOnly bool
}

// CreateResult is the outcome of a Create.
type CreateResult struct {
	// Created is false when the stream existed with the same
	// configuration.
	Created bool
	Info    Info
}

// Create creates a stream, or confirms one that exists with the same
// configuration. It returns a conflict if the stream exists with another
// configuration or was deleted while forks still read it, not_found if the
// source of a fork does not exist, and bad_request for an invalid request
// (a fork offset that is not a position of the source, a sub-offset past
// the append that follows it, invalid JSON).
func (s *Service) Create(ctx context.Context, req CreateRequest) (*CreateResult, error) {
	if err := checkWritable(req.Path); err != nil {
		return nil, err
	}
	if req.TTL != nil && req.ExpiresAt != nil {
		return nil, errorf(CodeBadRequest, "Stream-TTL and Stream-Expires-At are exclusive")
	}
	if req.ForkSubOffset < 0 {
		return nil, errorf(CodeBadRequest, "Stream-Fork-Sub-Offset must not be negative")
	}
	if req.ForkedFrom == "" && (req.ForkOffset != "" || req.ForkSubOffset != 0) {
		return nil, errorf(CodeBadRequest, "a fork offset needs Stream-Forked-From")
	}
	if req.ContentType != "" && mediaType(req.ContentType) == "" {
		return nil, errorf(CodeBadRequest, "Content-Type %q is malformed", clip.String(req.ContentType, 64))
	}
	res, releases, err := s.createInOrder(ctx, threadID(req.Path), req)
	// Once every lock is let go: a release takes the lock of the stream it
	// looks at, which may be the fork's source.
	for _, r := range releases {
		s.release(ctx, r)
	}
	if err != nil {
		return nil, err
	}
	if res.Created && len(req.Body) > 0 && s.opts.OnAppend != nil {
		s.opts.OnAppend(req.Path)
	}
	return res, nil
}

// createInOrder does a Create with the stream's write lock, and a fork's
// source's, held. It returns the streams to release (see Service.release)
// once they are let go.
//
// A fork holds its source's write lock too, from its plan to its commit.
// Two write locks are always taken in the order of the streams' IDs: a
// fork of b into a and one of a into b at once each held one and waited
// for the other, for good. When the source's comes first, it is taken
// here, before the fork's.
func (s *Service) createInOrder(ctx context.Context, id string, req CreateRequest) (*CreateResult, []string, error) {
	var source *entry
	if sid, ok := forkSourceID(req); ok && sid < id {
		source = s.lockEntry(sid)
		defer source.wmu.Unlock()
	}
	var releases []string
	for attempt := 0; ; attempt++ {
		var (
			res     *CreateResult
			release string
			expired bool
		)
		err := s.locked(ctx, id, func(e *entry, v *view) error {
			res, release, expired = nil, "", false
			if v.exists && !v.meta.Deleted && attempt == 0 {
				exp, err := s.expired(ctx, id, v)
				if err != nil {
					return err
				}
				if exp {
					// Remove it, then start over on the store's state.
					release, _, err = s.remove(ctx, e, v)
					expired = true
					return err
				}
			}
			if v.exists && v.meta.Deleted {
				return errorf(CodeConflict, "the stream was deleted but forks still read it: its path cannot be used until they are gone")
			}
			var err error
			res, release, err = s.create(ctx, e, v, req, source)
			return err
		})
		if release != "" {
			releases = append(releases, release)
		}
		if err != nil || !expired {
			return res, releases, err
		}
	}
}

// create does a Create with the stream's write lock held (and, if source
// is not nil, the fork's source's: see createInOrder). It returns the stream to
// release (see Service.release) if it took a fork back.
func (s *Service) create(ctx context.Context, e *entry, v *view, req CreateRequest, source *entry) (*CreateResult, string, error) {
	m := meta{ContentType: req.ContentType, TTL: req.TTL, ClosedAtCreate: req.Closed, Inc: newInc()}
	if req.ExpiresAt != nil {
		ms := req.ExpiresAt.UnixMilli()
		m.ExpiresAt = &ms
	}
	var fork *forkPlan
	if req.ForkedFrom != "" {
		var err error
		if fork, err = s.planFork(ctx, e.id, req, source); err != nil {
			return nil, "", err
		}
		defer fork.unlock()
		m.ForkedFrom, m.ForkOffset, m.ForkSub = fork.source, fork.offset, req.ForkSubOffset
		if m.ContentType == "" {
			m.ContentType = fork.contentType
		}
		if m.TTL == nil && m.ExpiresAt == nil {
			m.TTL, m.ExpiresAt = fork.ttl, fork.expiresAt
		}
	}
	if m.ContentType == "" {
		m.ContentType = DefaultContentType
	}

	if v.exists {
		if !sameConfig(&v.meta, &m, req.ForkOffset != "") {
			return nil, "", errorf(CodeConflict, "the stream exists with another configuration")
		}
		s.touch(e.id, v, true)
		return &CreateResult{Info: s.info(pathOf(e.id), v)}, "", nil
	}

	jsonMode := IsJSON(m.ContentType)
	var evs []*tether.Event
	now := s.now()
	if fork != nil && fork.prefix != nil {
		evs = append(evs, fork.prefix(now, jsonMode, s.opts.ChunkBytes)...)
	}
	if len(req.Body) > 0 {
		var msgs jsonMessages
		if jsonMode {
			var err error
			if msgs, err = parseJSONBody(req.Body, true); err != nil {
				return nil, "", err
			}
		}
		evs = append(evs, dataEvents(now, msgs, req.Body, jsonMode, s.opts.ChunkBytes)...)
	}
	if req.Closed {
		m.Closed = true
		evs = append(evs, &tether.Event{Type: EventClose, TS: now})
	}
	enc, err := encodeAll(evs)
	if err != nil {
		return nil, "", &Error{Code: CodeBadRequest, Message: "the data cannot be encoded", cause: err}
	}
	nv := &view{exists: true, meta: m, created: now, updated: now, tail: tether.OffsetStart}
	if fork != nil {
		nv.chain = fork.chain
		// The reference first: whoever counts the source's forks once the
		// fork exists finds it.
		if err := s.addRef(ctx, fork.source, e.id); err != nil {
			return nil, "", err
		}
	}
	b := storeBatch(e.id, s.threadRow(e.id, nv, m, now), evs, enc)
	res, err := s.st.Commit(context.WithoutCancel(ctx), b)
	if err != nil {
		s.forget(e)
		return nil, "", s.commitErr(err)
	}
	nv.version = res.Version
	if n := len(res.Records); n > 0 {
		nv.tail = res.Records[n-1].Offset
	}
	e.publish(nv)
	if fork != nil && s.opts.Shared {
		if err := s.checkSource(ctx, fork); err != nil {
			// Another node deleted the source before it could count this
			// fork (see Service.remove): take the fork back.
			if derr := s.st.DeleteThread(context.WithoutCancel(ctx), e.id); derr != nil && !errors.Is(derr, store.ErrNotFound) {
				s.log.Error("take back a fork of a deleted stream", "stream", e.id, "err", derr)
			}
			s.hub.CloseThread(e.id)
			s.forget(e)
			return nil, fork.source, err
		}
	}
	s.touch(e.id, nv, false)
	return &CreateResult{Created: true, Info: s.info(pathOf(e.id), nv)}, "", nil
}

// checkSource checks, once a fork is created, that its source is still
// the stream it was planned on, not deleted: on a shared store another
// node may have deleted it meanwhile.
func (s *Service) checkSource(ctx context.Context, fork *forkPlan) error {
	rec, err := s.row(ctx, fork.source)
	if err != nil {
		return err
	}
	if rec == nil {
		return errorf(CodeNotFound, "the source stream does not exist")
	}
	m, err := decodeMeta(rec.Thread.Metadata)
	if err != nil {
		return &Error{Code: CodeUnavailable, Message: "stream metadata is unreadable", cause: err}
	}
	if m.Inc != fork.sourceInc || !rec.Thread.CreatedAt.Equal(fork.sourceCreated.Time) {
		return errorf(CodeNotFound, "the source stream does not exist")
	}
	if m.Deleted {
		return errorf(CodeConflict, "the source stream was deleted")
	}
	return nil
}

// newInc returns a new incarnation name (meta.Inc).
func newInc() string { return fmt.Sprintf("%016x", rand.Uint64()) }

// sameConfig reports whether an existing stream's configuration matches a
// create's. A fork offset is compared only when the request named one (by
// default a fork starts at the source's tail, which moves).
func sameConfig(have, want *meta, forkOffsetGiven bool) bool {
	eqInt := func(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
	return sameMediaType(have.ContentType, want.ContentType) &&
		eqInt(have.TTL, want.TTL) && eqInt(have.ExpiresAt, want.ExpiresAt) &&
		have.Closed == want.ClosedAtCreate &&
		have.ForkedFrom == want.ForkedFrom &&
		(!forkOffsetGiven || have.ForkOffset == want.ForkOffset) &&
		have.ForkSub == want.ForkSub
}

// info describes a stream from its view.
func (s *Service) info(path string, v *view) Info {
	in := Info{Path: path, ContentType: v.meta.ContentType, TTL: v.meta.TTL, Closed: v.meta.Closed,
		Tail: wire(v.tailPos()), Created: v.created.Time}
	if t, ok := v.meta.expiresAt(); ok {
		in.ExpiresAt = &t
	}
	return in
}

// checkPath checks a stream path.
func checkPath(path string) error {
	if path == "" || len(path) > 1024 {
		return errorf(CodeBadRequest, "a stream path must be 1 to 1024 bytes")
	}
	for _, seg := range strings.Split(path, "/") {
		if seg == "." || seg == ".." {
			return errorf(CodeBadRequest, "a stream path must not contain . or .. segments")
		}
	}
	for i := 0; i < len(path); i++ {
		if path[i] < 0x20 || path[i] == 0x7f {
			return errorf(CodeBadRequest, "a stream path must not contain control characters")
		}
	}
	return nil
}

// checkWritable checks that path can name a stream that clients write.
func checkWritable(path string) error {
	if err := checkPath(path); err != nil {
		return err
	}
	if _, ok := threadLog(path); ok {
		return errorf(CodeReadOnly, "thread logs are read-only")
	}
	if path == ReservedPrefix || strings.HasPrefix(path, ReservedPrefix+"/") {
		return errorf(CodeNotFound, "%s/ is reserved", ReservedPrefix)
	}
	return nil
}

// ReservedPrefix is the path under which the protocol's control APIs live
// (subscriptions); no stream can be created there.
const ReservedPrefix = "__ds"

// ThreadsPrefix is the path under which thread logs are readable.
const ThreadsPrefix = "threads/"

// threadLog returns the thread ID of a thread log path.
func threadLog(path string) (string, bool) {
	tid, ok := strings.CutPrefix(path, ThreadsPrefix)
	return tid, ok
}
