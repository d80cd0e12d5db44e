package streams

import (
	"context"
	"errors"
	"strings"
	"sync"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// entry is the in-memory state of one stream.
type entry struct {
	id string

	// wmu is held by a write from its checks through its commit: writes of
	// a stream are serialized, and each commit carries the version its
	// checks saw (the store refuses it if another writer got there first).
	wmu       sync.Mutex
	producers map[string]*store.Producer // producer ID → state, as committed; guarded by wmu

	mu   sync.Mutex
	v    *view // nil until loaded; replaced, never modified
	gone bool  // removed from Service.entries: look it up again
}

// view is what is known of a stream at one point: its row and where its
// data is. A view is never modified once published.
type view struct {
	exists  bool
	meta    meta
	created tether.Time
	updated tether.Time
	// version is the number of events in the stream's own log, and tail
	// the offset of the last (OffsetStart when it has none).
	version int64
	tail    position
	// chain is where the data a fork inherits is: parts of its ancestors'
	// logs, oldest first.
	chain []segment
}

// segment is the part of a log that a fork inherits: its events up to and
// including upto (none when upto is OffsetStart).
type segment struct {
	thread string
	upto   position
}

// tailPos returns the stream's tail: its last event, or where it was
// forked when it has none of its own.
func (v *view) tailPos() position {
	if v.tail.IsEvent() {
		return v.tail
	}
	if n := len(v.chain); n > 0 {
		return v.chain[n-1].upto
	}
	return tether.OffsetStart
}

// with returns a copy of v for a change.
func (v *view) with() *view {
	c := *v
	return &c
}

// threadID returns the log of the stream at path.
func threadID(path string) string { return Namespace + ":" + path }

// pathOf returns the path of a stream's log.
func pathOf(id string) string { return strings.TrimPrefix(id, Namespace+":") }

// entry returns the entry of a stream, creating it.
func (s *Service) entry(id string) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[id]
	if e == nil {
		e = &entry{id: id}
		s.entries[id] = e
		s.evictLocked()
	}
	return e
}

// evictLocked drops idle entries beyond MaxStreams. s.mu is held.
func (s *Service) evictLocked() {
	over := len(s.entries) - s.opts.MaxStreams
	for id, e := range s.entries {
		if over <= 0 {
			return
		}
		if !e.wmu.TryLock() {
			continue
		}
		e.mu.Lock()
		e.gone = true
		e.mu.Unlock()
		e.wmu.Unlock()
		delete(s.entries, id)
		over--
	}
}

// forget removes an entry from the cache: the next use loads the stream
// again. e.wmu is held.
func (s *Service) forget(e *entry) {
	s.mu.Lock()
	if s.entries[e.id] == e {
		delete(s.entries, e.id)
	}
	s.mu.Unlock()
	e.mu.Lock()
	e.gone = true
	e.mu.Unlock()
}

func (e *entry) view() *view {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.v
}

func (e *entry) publish(v *view) {
	e.mu.Lock()
	e.v = v
	e.mu.Unlock()
}

// locked runs fn with the stream's write lock held and its view loaded.
func (s *Service) locked(ctx context.Context, id string, fn func(e *entry, v *view) error) error {
	for {
		e := s.entry(id)
		e.wmu.Lock()
		e.mu.Lock()
		gone := e.gone
		e.mu.Unlock()
		if gone {
			e.wmu.Unlock()
			continue
		}
		v, err := s.ensure(ctx, e)
		if err != nil {
			e.wmu.Unlock()
			return err
		}
		err = fn(e, v)
		e.wmu.Unlock()
		return err
	}
}

// snapshot returns the current view of a stream, loading it if needed.
func (s *Service) snapshot(ctx context.Context, id string) (*view, error) {
	e := s.entry(id)
	if v := e.view(); v != nil {
		return v, nil
	}
	var out *view
	err := s.locked(ctx, id, func(_ *entry, v *view) error { out = v; return nil })
	return out, err
}

// ensure loads e's view if needed. e.wmu is held.
func (s *Service) ensure(ctx context.Context, e *entry) (*view, error) {
	if v := e.view(); v != nil {
		return v, nil
	}
	v, err := s.load(ctx, e.id)
	if err != nil {
		return nil, err
	}
	e.producers = make(map[string]*store.Producer)
	e.publish(v)
	return v, nil
}

// load reads a stream's row and works out its chain.
func (s *Service) load(ctx context.Context, id string) (*view, error) {
	rec, err := s.st.Thread(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return &view{tail: tether.OffsetStart}, nil
	}
	if err != nil {
		return nil, s.storeErr(err)
	}
	m, err := decodeMeta(rec.Thread.Metadata)
	if err != nil {
		return nil, &Error{Code: CodeUnavailable, Message: "stream metadata is unreadable", cause: err}
	}
	v := &view{exists: true, meta: m, created: rec.Thread.CreatedAt, updated: rec.Thread.UpdatedAt,
		version: rec.Version, tail: rec.Thread.LastOffset}
	if !v.tail.IsEvent() {
		v.tail = tether.OffsetStart
	}
	if m.ForkedFrom != "" {
		v.chain, err = s.chainOf(ctx, m.ForkedFrom, forkPos(m.ForkOffset), 0)
		if err != nil {
			return nil, err
		}
	}
	return v, nil
}

// forkPos returns the position a fork inherits up to.
func forkPos(o tether.Offset) position {
	if o == "" {
		return tether.OffsetStart
	}
	return o
}

// maxForkDepth bounds a chain of forks.
const maxForkDepth = 64

// chainOf returns the segments a fork of parent at upto inherits: the
// parent's own chain cut at upto, and the parent's own events up to upto.
// Fork metadata never changes, so this reads rows without locks.
func (s *Service) chainOf(ctx context.Context, parent string, upto position, depth int) ([]segment, error) {
	if depth > maxForkDepth {
		return nil, errorf(CodeUnavailable, "fork chain is longer than %d", maxForkDepth)
	}
	rec, err := s.st.Thread(ctx, parent)
	if err != nil {
		return nil, s.storeErr(err)
	}
	m, err := decodeMeta(rec.Thread.Metadata)
	if err != nil {
		return nil, &Error{Code: CodeUnavailable, Message: "stream metadata is unreadable", cause: err}
	}
	var chain []segment
	if m.ForkedFrom != "" {
		if chain, err = s.chainOf(ctx, m.ForkedFrom, forkPos(m.ForkOffset), depth+1); err != nil {
			return nil, err
		}
	}
	return append(cut(chain, upto), segment{thread: parent, upto: upto}), nil
}

// cut bounds every segment of chain at upto.
func cut(chain []segment, upto position) []segment {
	out := make([]segment, len(chain))
	for i, sg := range chain {
		if before(upto, sg.upto) {
			sg.upto = upto
		}
		out[i] = sg
	}
	return out
}

// row returns the thread row that stores v's metadata m.
func (s *Service) row(id string, v *view, m meta, now tether.Time) *tether.Thread {
	return &tether.Thread{ID: id, Status: tether.ThreadIdle, Metadata: m.encode(), CreatedAt: v.created, UpdatedAt: now}
}

// commit writes a batch for a stream whose write lock is held and publishes
// its new view. m is the metadata after the batch.
func (s *Service) commit(ctx context.Context, e *entry, v *view, m meta, evs []*tether.Event, producers []store.Producer) (*view, *store.Result, error) {
	enc, err := encodeAll(evs)
	if err != nil {
		return nil, nil, &Error{Code: CodeBadRequest, Message: "the data cannot be encoded", cause: err}
	}
	now := s.now()
	b := &store.Batch{ThreadID: e.id, Version: v.version, Events: evs, Encoded: enc,
		Thread: s.row(e.id, v, m, now), Producers: producers}
	// The commit must not be abandoned half way because the client left:
	// its outcome is what the stream's state is built on.
	res, err := s.st.Commit(context.WithoutCancel(ctx), b)
	if err != nil {
		// Whatever happened, what is in memory may be stale: load again.
		s.forget(e)
		if errors.Is(err, store.ErrConflict) {
			return nil, nil, &Error{Code: CodeUnavailable, Message: "the stream was changed concurrently; retry", cause: err}
		}
		return nil, nil, s.storeErr(err)
	}
	nv := v.with()
	nv.meta = m
	nv.updated = now
	nv.version = res.Version
	if n := len(res.Records); n > 0 {
		nv.tail = res.Records[n-1].Offset
	}
	for i := range producers {
		p := producers[i]
		e.producers[p.Key] = &p
	}
	e.publish(nv)
	return nv, res, nil
}

// remove deletes a stream whose write lock is held. If forks read its log
// it is only marked deleted. It returns the stream whose reference must
// then be released (the parent of a removed fork), to do after unlocking.
func (s *Service) remove(ctx context.Context, e *entry, v *view) (release string, err error) {
	if s.refCount(e.id) > 0 {
		if !v.meta.Deleted {
			m := v.meta
			m.Deleted = true
			if _, _, err := s.commit(ctx, e, v, m, nil, nil); err != nil {
				return "", err
			}
		}
		s.hub.CloseThread(e.id)
		return "", nil
	}
	if err := s.st.DeleteThread(context.WithoutCancel(ctx), e.id); err != nil && !errors.Is(err, store.ErrNotFound) {
		s.forget(e)
		return "", s.storeErr(err)
	}
	s.hub.CloseThread(e.id)
	s.forget(e)
	s.mu.Lock()
	delete(s.access, e.id)
	s.mu.Unlock()
	return v.meta.ForkedFrom, nil
}

// producer returns the state of a producer of a stream whose write lock is
// held; nil if it never appended.
func (s *Service) producer(ctx context.Context, e *entry, id string) (*store.Producer, error) {
	if p, ok := e.producers[id]; ok {
		return p, nil
	}
	p, err := s.st.Producer(ctx, e.id, id)
	if errors.Is(err, store.ErrNotFound) {
		e.producers[id] = nil
		return nil, nil
	}
	if err != nil {
		return nil, s.storeErr(err)
	}
	e.producers[id] = p
	return p, nil
}
