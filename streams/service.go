package streams

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/hub"
	"github.com/tetherhq/tether/store"
)

// Namespace is the store namespace of streams: a stream at path p is the
// log "ds:"+p (store.ThreadQuery.Namespace).
const Namespace = "ds"

// Options configure a Service. The zero value is ready to use.
type Options struct {
	// ChunkBytes bounds the data of one stored event; a larger append is
	// stored as several events, committed together. Defaults to 256 KiB.
	ChunkBytes int
	// ReadBytes is about the most data one catch-up read returns (at least
	// one event is always returned). Defaults to 1 MiB.
	ReadBytes int
	// MaxStreams is how many stream states are kept in memory; idle ones
	// beyond it are dropped and read again from the store when needed.
	// Defaults to 10,000.
	MaxStreams int
	// SweepInterval is how often expired streams are removed from the
	// store (they are refused from the moment they expire). Defaults to 1m.
	SweepInterval time.Duration
	// OnAppend, if set, is called after every commit that adds to a stream
	// (a create with data, an append, a close), with the stream's path. It
	// runs on the appender's goroutine and must not block.
	OnAppend func(path string)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
}

func (o *Options) setDefaults() {
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = 256 << 10
	}
	if o.ReadBytes <= 0 {
		o.ReadBytes = 1 << 20
	}
	if o.MaxStreams <= 0 {
		o.MaxStreams = 10000
	}
	if o.SweepInterval <= 0 {
		o.SweepInterval = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Service keeps Durable Streams in a store.Store and serves them. Create
// one with New, then Start it.
type Service struct {
	st      store.Store
	hub     *hub.Hub
	opts    Options
	log     *slog.Logger
	started time.Time

	mu      sync.Mutex
	entries map[string]*entry    // by thread ID
	refs    map[string]int       // thread ID → forks that read its log
	access  map[string]time.Time // thread ID → last read or write, for streams with a TTL

	closing   chan struct{}
	closeOnce sync.Once
	bg        sync.WaitGroup
}

// New returns a service over st whose live reads follow h, the hub that
// the store's commits are published to (the engine's: it publishes every
// committed batch, streams included).
func New(st store.Store, h *hub.Hub, opts Options) *Service {
	opts.setDefaults()
	return &Service{
		st: st, hub: h, opts: opts, log: opts.Logger, started: opts.Now(),
		entries: make(map[string]*entry), refs: make(map[string]int), access: make(map[string]time.Time),
		closing: make(chan struct{}),
	}
}

// Start counts the forks of every stream (a stream deleted while forks
// read it is kept until they are gone), removes what a crash left behind,
// and starts the sweeper of expired streams.
func (s *Service) Start(ctx context.Context) error {
	refs := make(map[string]int)
	var orphans []string
	err := s.scan(ctx, func(id string, m meta) {
		if m.ForkedFrom != "" {
			refs[m.ForkedFrom]++
		}
		if m.Deleted {
			orphans = append(orphans, id)
		}
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.refs = refs
	s.mu.Unlock()
	for _, id := range orphans {
		if s.refCount(id) == 0 {
			s.expire(ctx, id)
		}
	}
	s.bg.Add(1)
	go s.sweepLoop()
	return nil
}

// Close stops the sweeper. It does not close the store or the hub.
func (s *Service) Close() error {
	s.closeOnce.Do(func() { close(s.closing) })
	s.bg.Wait()
	return nil
}

// scan calls fn for every stream in the store.
func (s *Service) scan(ctx context.Context, fn func(id string, m meta)) error {
	q := store.ThreadQuery{Namespace: Namespace, Limit: 500}
	for {
		page, err := s.st.Threads(ctx, q)
		if err != nil {
			return s.storeErr(err)
		}
		for _, t := range page.Threads {
			m, err := decodeMeta(t.Metadata)
			if err != nil {
				s.log.Warn("stream metadata does not decode", "stream", t.ID, "err", err)
				continue
			}
			fn(t.ID, m)
		}
		if page.Next == "" {
			return nil
		}
		q.Cursor = page.Next
	}
}

func (s *Service) sweepLoop() {
	defer s.bg.Done()
	t := time.NewTicker(s.opts.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-t.C:
			s.Sweep(context.Background())
		}
	}
}

// Sweep removes the streams that have expired. The sweeper calls it every
// SweepInterval; an expired stream is refused before that anyway.
func (s *Service) Sweep(ctx context.Context) {
	now := s.opts.Now()
	var due []string
	err := s.scan(ctx, func(id string, m meta) {
		v := &view{exists: true, meta: m}
		if m.Deleted || s.expiredAt(id, v, now) {
			due = append(due, id)
		}
	})
	if err != nil {
		s.log.Warn("sweep streams", "err", err)
		return
	}
	for _, id := range due {
		s.expire(ctx, id)
	}
}

// expire removes (or marks deleted, if forks read it) a stream that has
// expired.
func (s *Service) expire(ctx context.Context, id string) {
	var release string
	err := s.locked(ctx, id, func(e *entry, v *view) error {
		if !v.exists {
			return nil
		}
		if !v.meta.Deleted && !s.expiredAt(id, v, s.opts.Now()) {
			return nil
		}
		var err error
		release, err = s.remove(ctx, e, v)
		return err
	})
	if err != nil {
		s.log.Warn("expire stream", "stream", id, "err", err)
	}
	s.release(ctx, release)
}

// expiredAt reports whether a stream has expired at now: its Expires-At
// has passed, or its TTL has run out since its last read or write.
func (s *Service) expiredAt(id string, v *view, now time.Time) bool {
	if exp, ok := v.meta.expiresAt(); ok && !now.Before(exp) {
		return true
	}
	if v.meta.TTL == nil {
		return false
	}
	return !now.Before(s.lastAccess(id, v).Add(time.Duration(*v.meta.TTL) * time.Second))
}

// lastAccess returns when a stream was last read or written. Reads are
// tracked in memory only (a read never writes to the store): after a
// restart a stream's window starts again at the later of its last write
// and the start of this process, so a restart may lengthen a TTL but never
// shortens one.
func (s *Service) lastAccess(id string, v *view) time.Time {
	s.mu.Lock()
	t, ok := s.access[id]
	s.mu.Unlock()
	if ok {
		return t
	}
	if u := v.updated.Time; u.After(s.started) {
		return u
	}
	return s.started
}

// touch records a read or write of a stream with a TTL.
func (s *Service) touch(id string, v *view) {
	if v.meta.TTL == nil {
		return
	}
	now := s.opts.Now()
	s.mu.Lock()
	if now.After(s.access[id]) {
		s.access[id] = now
	}
	s.mu.Unlock()
}

func (s *Service) refCount(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refs[id]
}

// release drops one fork's reference on the stream id (if not empty) and
// removes that stream if it was deleted and this was its last fork, and so
// on up the chain.
func (s *Service) release(ctx context.Context, id string) {
	for id != "" {
		s.mu.Lock()
		s.refs[id]--
		n := s.refs[id]
		if n <= 0 {
			delete(s.refs, id)
		}
		s.mu.Unlock()
		if n > 0 {
			return
		}
		next := ""
		err := s.locked(ctx, id, func(e *entry, v *view) error {
			if !v.exists || !v.meta.Deleted || s.refCount(id) > 0 {
				return nil
			}
			var err error
			next, err = s.remove(ctx, e, v)
			return err
		})
		if err != nil {
			s.log.Warn("remove a deleted stream after its last fork", "stream", id, "err", err)
			return
		}
		id = next
	}
}

// storeErr turns a store error into an *Error.
func (s *Service) storeErr(err error) error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return err
	case errors.Is(err, store.ErrNotFound):
		return &Error{Code: CodeNotFound, Message: "stream not found", cause: err}
	case errors.Is(err, store.ErrExists):
		return &Error{Code: CodeUnavailable, Message: "the stream was created concurrently; retry", cause: err}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return &Error{Code: CodeUnavailable, Message: "the store failed; retry", cause: err}
}

// now returns the current time as a tether.Time.
func (s *Service) now() tether.Time { return tether.At(s.opts.Now()) }

// Paths calls fn with the path of every stream that is not deleted, in no
// particular order. Its cost grows with the number of streams.
func (s *Service) Paths(ctx context.Context, fn func(path string)) error {
	return s.scan(ctx, func(id string, m meta) {
		if !m.Deleted {
			fn(pathOf(id))
		}
	})
}
