package streams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

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

// lockEntry returns the entry of a stream with its write lock held.
func (s *Service) lockEntry(id string) *entry {
	for {
		e := s.entry(id)
		e.wmu.Lock()
		e.mu.Lock()
		gone := e.gone
		e.mu.Unlock()
		if !gone {
			return e
		}
		e.wmu.Unlock()
	}
}

// maxAttempts bounds how often a write runs again because another node
// changed the stream between its checks and its commit.
const maxAttempts = 10

// errStale marks a commit that the store refused because the stream is no
// longer what the write's checks saw (another node wrote, deleted or
// created it): the write runs again on the store's state.
var errStale = errors.New("streams: the stream changed in the store")

// locked runs fn with the stream's write lock held and its view loaded (on
// a shared store, checked against the store first). If fn fails with
// errStale, it runs again on a view loaded again, after a random pause,
// up to maxAttempts times.
func (s *Service) locked(ctx context.Context, id string, fn func(e *entry, v *view) error) error {
	for attempt := 1; ; attempt++ {
		e := s.lockEntry(id)
		v, err := s.ensure(ctx, e)
		if err == nil {
			err = fn(e, v)
		}
		e.wmu.Unlock()
		if !errors.Is(err, errStale) {
			return err
		}
		if attempt == maxAttempts {
			return &Error{Code: CodeUnavailable, Message: "the stream keeps changing concurrently; retry", cause: err}
		}
		if err := pause(ctx, attempt); err != nil {
			return err
		}
	}
}

// pause waits a random time before attempt+1 of a write that collided
// with another node's, up to a bound that doubles with every attempt (1ms,
// 2ms, … 64ms), so that the writers do not collide again.
func pause(ctx context.Context, attempt int) error {
	d := time.Duration(rand.Int64N(int64(time.Millisecond << min(attempt-1, 6))))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// snapshot returns the current view of a stream, for a read. On a shared
// store it is the store's (another node may have changed the stream); else
// the cached one, loaded if needed.
func (s *Service) snapshot(ctx context.Context, id string) (*view, error) {
	if s.opts.Shared {
		var old *view
		if e := s.peek(id); e != nil {
			old = e.view()
		}
		rec, err := s.row(ctx, id)
		if err != nil {
			return nil, err
		}
		return s.viewOf(ctx, id, rec, old)
	}
	e := s.entry(id)
	if v := e.view(); v != nil {
		return v, nil
	}
	var out *view
	err := s.locked(ctx, id, func(_ *entry, v *view) error { out = v; return nil })
	return out, err
}

// peek returns the entry of a stream if there is one.
func (s *Service) peek(id string) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.entries[id]
}

// ensure returns e's view, loading it if needed; on a shared store it
// checks it against the store's row first, and loads it again if another
// node changed the stream. e.wmu is held.
func (s *Service) ensure(ctx context.Context, e *entry) (*view, error) {
	old := e.view()
	if old != nil && !s.opts.Shared {
		return old, nil
	}
	rec, err := s.row(ctx, e.id)
	if err != nil {
		return nil, err
	}
	v, err := s.viewOf(ctx, e.id, rec, old)
	if err != nil {
		return nil, err
	}
	if old != nil && old.same(v) {
		return old, nil
	}
	// Producers' states change only with events, so they are as cached
	// while the view is the same.
	e.producers = make(map[string]*store.Producer)
	e.publish(v)
	return v, nil
}

// same reports whether two views describe the same state of a stream: the
// same incarnation, events and configuration. Every change of a stream's
// row comes with events, so this is cheap to be sure of.
func (v *view) same(o *view) bool {
	return v.exists == o.exists && v.version == o.version && v.tail == o.tail &&
		v.created.Equal(o.created.Time) && bytes.Equal(v.meta.encode(), o.meta.encode())
}

// row reads a stream's row; nil if it does not exist.
func (s *Service) row(ctx context.Context, id string) (*store.ThreadRecord, error) {
	rec, err := s.st.Thread(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, s.storeErr(err)
	}
	return rec, nil
}

// viewOf returns the view of a stream's row rec (nil: it does not exist),
// taking the chain of old, an earlier view, if it is of the same fork.
func (s *Service) viewOf(ctx context.Context, id string, rec *store.ThreadRecord, old *view) (*view, error) {
	if rec == nil {
		return &view{tail: tether.OffsetStart}, nil
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
		if old != nil && old.exists && old.created.Equal(v.created.Time) && old.meta.Inc == m.Inc &&
			old.meta.ForkedFrom == m.ForkedFrom && old.meta.ForkOffset == m.ForkOffset {
			v.chain = old.chain // a fork's chain never changes
		} else if v.chain, err = s.chainOf(ctx, m.ForkedFrom, forkPos(m.ForkOffset), 0); err != nil {
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

// maxForkDepth is how many sources a fork may have (its source, that
// one's, and so on): a fork of a stream that has as many is refused when
// it is created. Every read of a fork walks them.
const maxForkDepth = 64

// maxLoadedForkDepth bounds the chain of sources read from the store when
// a fork is loaded, against metadata that would name them without end.
// It is far above maxForkDepth: forks made before that was checked at
// creation may be deeper, and were created readable.
const maxLoadedForkDepth = 1024

// chainOf returns the segments a fork of parent at upto inherits: the
// parent's own chain cut at upto, and the parent's own events up to upto.
// Fork metadata never changes, so this reads rows without locks.
func (s *Service) chainOf(ctx context.Context, parent string, upto position, depth int) ([]segment, error) {
	if depth > maxLoadedForkDepth {
		return nil, errorf(CodeUnavailable, "fork chain is longer than %d", maxLoadedForkDepth)
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

// threadRow returns the thread row that stores v's metadata m.
func (s *Service) threadRow(id string, v *view, m meta, now tether.Time) *tether.Thread {
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
		Thread: s.threadRow(e.id, v, m, now), Producers: producers}
	// The commit must not be abandoned half way because the client left:
	// its outcome is what the stream's state is built on.
	res, err := s.st.Commit(context.WithoutCancel(ctx), b)
	if err != nil {
		// Whatever happened, what is in memory may be stale: load again.
		s.forget(e)
		return nil, nil, s.commitErr(err)
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

// commitErr turns an error of a stream's commit into errStale if another
// writer (another node) changed the stream first: it was written (its
// version moved on), deleted, or created.
func (s *Service) commitErr(err error) error {
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrExists) {
		return fmt.Errorf("%w: %w", errStale, err)
	}
	return s.storeErr(err)
}

// remove deletes a stream whose write lock is held. If forks read its log
// it is only marked deleted (kept). It returns the stream whose forks must
// then be counted again (the parent of a removed fork; see release), to do
// after unlocking.
//
// On a shared store the stream is marked deleted first, then its forks are
// counted: a fork being created on another node either is counted, or sees
// the mark once it is committed (and takes itself back: see create). The
// mark is an event, so that writes racing it on other nodes fail their
// version, and their live readers see it and end.
func (s *Service) remove(ctx context.Context, e *entry, v *view) (release string, kept bool, err error) {
	if !v.meta.Deleted && s.opts.OnDelete != nil {
		// Reported once, as the stream stops being one (a stream marked
		// deleted before was reported then), and only once it has.
		defer func() {
			if err == nil {
				s.opts.OnDelete(pathOf(e.id))
			}
		}()
	}
	if s.opts.Shared && !v.meta.Deleted {
		if v, err = s.markDeleted(ctx, e, v); err != nil {
			return "", false, err
		}
	}
	n, refs, err := s.forks(ctx, e.id)
	if err != nil {
		return "", false, err
	}
	if n > 0 {
		if !v.meta.Deleted {
			if _, err := s.markDeleted(ctx, e, v); err != nil {
				return "", false, err
			}
		}
		s.hub.CloseThread(e.id)
		return "", true, nil
	}
	if err := s.st.DeleteThread(context.WithoutCancel(ctx), e.id); err != nil && !errors.Is(err, store.ErrNotFound) {
		s.forget(e)
		return "", false, s.storeErr(err)
	}
	// Its fork references go with it (stale ones are ignored anyway).
	if refs {
		if err := s.st.DeleteThread(context.WithoutCancel(ctx), refsID(e.id)); err != nil && !errors.Is(err, store.ErrNotFound) {
			s.log.Warn("delete the fork references of a deleted stream", "stream", e.id, "err", err)
		}
	}
	s.hub.CloseThread(e.id)
	s.forget(e)
	s.mu.Lock()
	delete(s.access, e.id)
	delete(s.persisted, e.id)
	s.mu.Unlock()
	return v.meta.ForkedFrom, false, nil
}

// markDeleted commits a stream's mark of deletion: Deleted in its
// metadata, and an event that ends its followers.
func (s *Service) markDeleted(ctx context.Context, e *entry, v *view) (*view, error) {
	m := v.meta
	m.Deleted = true
	nv, _, err := s.commit(ctx, e, v, m, []*tether.Event{{Type: EventDeleted, TS: s.now()}}, nil)
	return nv, err
}

// Fork references. A fork's creation first appends its thread ID to the
// source's log of references ("dsref:"+path, RefsNamespace), then creates
// the fork. The forks of a source are the references whose stream exists
// and forks it: a reference left by a fork that was deleted, or never
// created, does not count. So whether a stream may be removed is the
// store's to say, whichever node created its forks, across restarts.

// refsID returns the log of the fork references of the stream id.
func refsID(id string) string { return RefsNamespace + ":" + pathOf(id) }

// addRef records that fork is about to be created as a fork of source.
func (s *Service) addRef(ctx context.Context, source, fork string) error {
	id := refsID(source)
	data, _ := json.Marshal(fork) // a string
	for attempt := 1; ; attempt++ {
		now := s.now()
		ev := &tether.Event{Type: EventRef, TS: now, Data: data}
		enc, err := ev.Encode()
		if err != nil {
			return err
		}
		b := &store.Batch{ThreadID: id, Events: []*tether.Event{ev}, Encoded: [][]byte{enc}}
		rec, err := s.row(ctx, id)
		if err != nil {
			return err
		}
		if rec == nil {
			b.Create = true
			b.Thread = &tether.Thread{ID: id, Status: tether.ThreadIdle, CreatedAt: now, UpdatedAt: now}
		} else {
			b.Version = rec.Version
		}
		_, err = s.st.Commit(context.WithoutCancel(ctx), b)
		if err == nil {
			return nil
		}
		if err = s.commitErr(err); !errors.Is(err, errStale) {
			return err
		}
		if attempt == maxAttempts {
			return &Error{Code: CodeUnavailable, Message: "the source stream keeps changing concurrently; retry", cause: err}
		}
		if err := pause(ctx, attempt); err != nil {
			return err
		}
	}
}

// forks returns how many streams fork the stream id (its own incarnation:
// a path cannot be created again while forks read it), and whether it
// has a log of fork references.
func (s *Service) forks(ctx context.Context, id string) (n int, hasLog bool, err error) {
	refs := make(map[string]bool)
	after := tether.OffsetStart
	for {
		recs, err := s.st.ReadEvents(ctx, refsID(id), after, 1000)
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			return 0, false, s.storeErr(err)
		}
		hasLog = true
		for _, r := range recs {
			var rec record
			var fork string
			if err := json.Unmarshal(r.Data, &rec); err != nil || json.Unmarshal(rec.Data, &fork) != nil {
				return 0, true, &Error{Code: CodeUnavailable, Message: "a fork reference is unreadable", cause: err}
			}
			refs[fork] = true
		}
		if len(recs) < 1000 {
			break
		}
		after = recs[len(recs)-1].Offset
	}
	for fork := range refs {
		rec, err := s.row(ctx, fork)
		if err != nil {
			return 0, true, err
		}
		if rec == nil {
			continue
		}
		m, err := decodeMeta(rec.Thread.Metadata)
		if err != nil || m.ForkedFrom == id {
			n++ // unreadable: assume it does
		}
	}
	return n, hasLog, nil
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
