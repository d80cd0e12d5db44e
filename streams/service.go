package streams

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/hub"
	"github.com/tetherhq/tether/store"
)

// Namespace is the store namespace of streams: a stream at path p is the
// log "ds:"+p (store.ThreadQuery.Namespace).
const Namespace = "ds"

// RefsNamespace is the store namespace of the logs of fork references: the
// forks of the stream at path p are recorded in the log "dsref:"+p.
const RefsNamespace = "dsref"

// Options configure a Service. The zero value is ready to use.
type Options struct {
	// ChunkBytes bounds the data of one stored event; a larger append is
	// stored as several events, committed together. Defaults to 256 KiB.
	ChunkBytes int
	// ReadBytes is the most data one Read returns (live reads page by
	// it): it ends at the last whole append within it, and one larger
	// append is returned whole. It is also about what a CatchUp holds in
	// memory at a time. Defaults to 1 MiB.
	ReadBytes int
	// CatchUpBytes bounds the data of one CatchUp (a catch-up answer): it
	// ends at the last whole append within the bound (at least one is
	// always returned), short of the tail, and the client reads on from
	// its end. Defaults to 64 MiB, far above what a chat's stream holds.
	CatchUpBytes int64
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
	// OnDelete, if set, is called when a stream is deleted or expires
	// (removed, or marked deleted while forks read it), with its path. It
	// runs with the stream's write lock held, before a stream can be
	// created again at the path, and must not block.
	OnDelete func(path string)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
	// Shared says other nodes (other Services) use the same store, as
	// with NATS JetStream: what this node has cached of a stream may be
	// stale. Every read and write then checks the stream's row in the
	// store first (one more read of the store each), and reads of streams
	// with a TTL are recorded in the store now and then (see Service.touch)
	// so that no node expires a stream that another one reads.
	Shared bool
}

func (o *Options) setDefaults() {
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = 256 << 10
	}
	if o.ReadBytes <= 0 {
		o.ReadBytes = 1 << 20
	}
	if o.CatchUpBytes <= 0 {
		o.CatchUpBytes = 64 << 20
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

	// tag tells this Service's records of reads (Options.Shared) from
	// other nodes'.
	tag int64

	mu        sync.Mutex
	entries   map[string]*entry    // by thread ID
	access    map[string]time.Time // thread ID → last read or write, for streams with a TTL
	persisted map[string]time.Time // thread ID → last read recorded in the store (Options.Shared)
	closed    bool                 // no more background work

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
		st: st, hub: h, opts: opts, log: opts.Logger, started: opts.Now(), tag: rand.Int64(),
		entries: make(map[string]*entry), access: make(map[string]time.Time), persisted: make(map[string]time.Time),
		closing: make(chan struct{}),
	}
}

// Start removes what a crash left behind (streams marked deleted whose
// last fork is gone, expired streams), and starts the sweeper of expired
// streams.
func (s *Service) Start(ctx context.Context) error {
	if err := s.sweep(ctx); err != nil {
		return err
	}
	s.bg.Add(1)
	go s.sweepLoop()
	return nil
}

// Close stops the sweeper and waits for the records of reads in flight. It
// does not close the store or the hub.
func (s *Service) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.closing)
	})
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

// Sweep removes the streams that have expired, and those marked deleted
// whose last fork is gone. The sweeper calls it every SweepInterval; an
// expired stream is refused before that anyway.
func (s *Service) Sweep(ctx context.Context) {
	if err := s.sweep(ctx); err != nil {
		s.log.Warn("sweep streams", "err", err)
	}
}

func (s *Service) sweep(ctx context.Context) error {
	now := s.opts.Now()
	var due []string
	seen := make(map[string]bool)
	err := s.scan(ctx, func(id string, m meta) {
		seen[id] = true
		v := &view{exists: true, meta: m}
		if m.Deleted || s.expiredAt(id, v, now) {
			due = append(due, id)
		}
	})
	if err != nil {
		return err
	}
	// Forget the accesses of streams removed elsewhere (by another node);
	// a stream created since the scan began was accessed since.
	s.mu.Lock()
	for id, t := range s.access {
		if !seen[id] && t.Before(now) {
			delete(s.access, id)
			delete(s.persisted, id)
		}
	}
	s.mu.Unlock()
	for _, id := range due {
		if _, _, err := s.expire(ctx, id); err != nil {
			s.log.Warn("expire stream", "stream", id, "err", err)
		}
	}
	return nil
}

// expire removes (or marks deleted, if forks read it) a stream that has
// expired, and removes one marked deleted whose forks are gone. It
// reports whether the stream is still there and alive (it had not expired
// after all: another node read it), or kept, marked deleted.
func (s *Service) expire(ctx context.Context, id string) (alive, kept bool, err error) {
	var release string
	err = s.locked(ctx, id, func(e *entry, v *view) error {
		release, alive, kept = "", false, false
		if !v.exists {
			return nil
		}
		if !v.meta.Deleted {
			expired, err := s.expired(ctx, id, v)
			if err != nil {
				return err
			}
			if !expired {
				alive = true
				return nil
			}
		}
		var err error
		release, kept, err = s.remove(ctx, e, v)
		return err
	})
	s.release(ctx, release)
	return alive, kept, err
}

// expiredAt reports whether a stream has expired at now as far as this
// node knows: its Expires-At has passed, or its TTL has run out since its
// last read or write.
func (s *Service) expiredAt(id string, v *view, now time.Time) bool {
	if exp, ok := v.meta.expiresAt(); ok && !now.Before(exp) {
		return true
	}
	if v.meta.TTL == nil {
		return false
	}
	return !now.Before(s.lastAccess(id, v).Add(ttlOf(v)))
}

// expired reports whether a stream has expired. On a shared store, a
// stream whose TTL has run out as far as this node knows is checked
// against the last read that the nodes recorded in the store (see touch).
func (s *Service) expired(ctx context.Context, id string, v *view) (bool, error) {
	now := s.opts.Now()
	if !s.expiredAt(id, v, now) {
		return false, nil
	}
	if exp, ok := v.meta.expiresAt(); ok && !now.Before(exp) {
		return true, nil
	}
	if !s.opts.Shared {
		return true, nil
	}
	p, err := s.st.Producer(ctx, id, accessKey)
	if errors.Is(err, store.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, s.storeErr(err)
	}
	last := time.UnixMilli(p.Seq)
	if p.Epoch != s.tag {
		// Another node records a read only once per interval: its last
		// read may be up to an interval later.
		last = last.Add(recordEvery(ttlOf(v)))
	}
	return !now.Before(last.Add(ttlOf(v))), nil
}

// ttlOf returns a stream's TTL. One longer than a time.Duration holds
// (about 292 years; a client asking for "forever" may send more) is the
// longest there is: converted as it is, it would wrap around to a window
// that has already run out, and the stream would expire at once.
func ttlOf(v *view) time.Duration {
	if *v.meta.TTL > int64(math.MaxInt64/time.Second) {
		return math.MaxInt64
	}
	return time.Duration(*v.meta.TTL) * time.Second
}

// lastAccess returns when a stream was last read or written, as far as
// this node knows: reads are tracked in memory (and, on a shared store,
// recorded in the store now and then: see touch and expired). After a
// restart a stream's window starts again at the later of its last write
// and the start of this process, so a restart may lengthen a TTL but never
// shortens one.
func (s *Service) lastAccess(id string, v *view) time.Time {
	s.mu.Lock()
	t, ok := s.access[id]
	s.mu.Unlock()
	if !ok {
		t = s.started
	}
	if u := v.updated.Time; u.After(t) {
		return u // written since (by another node, on a shared store)
	}
	return t
}

// accessKey is the producer row (of the stream's log) where the nodes
// sharing a store record a stream's last read: Seq is its time in Unix
// milliseconds, Epoch the tag of the node. Clients' producer IDs cannot
// have control characters, so cannot take it.
const accessKey = "\x1fread"

// recordEvery is how often a node records reads of a stream with the
// given TTL in the store (Options.Shared): a quarter of the TTL. Another
// node so knows of every read up to that much late, and counts the TTL
// from the recorded read plus that much.
func recordEvery(ttl time.Duration) time.Duration { return max(ttl/4, 10*time.Millisecond) }

// touch records an access of a stream with a TTL: a write (the store has
// it in the row) or a read.
func (s *Service) touch(id string, v *view, read bool) {
	if v.meta.TTL == nil {
		return
	}
	now := s.opts.Now()
	record := false
	s.mu.Lock()
	if now.After(s.access[id]) {
		s.access[id] = now
	}
	if read && s.opts.Shared && !s.closed && now.Sub(s.persisted[id]) >= recordEvery(ttlOf(v)) {
		s.persisted[id] = now
		record = true
		s.bg.Add(1)
	}
	s.mu.Unlock()
	if record {
		go s.recordRead(id, now)
	}
}

// recordRead records in the store that this node read a stream at, for
// the other nodes sharing the store (see expired). It is a batch of the
// stream without events, which does not touch the stream's row.
func (s *Service) recordRead(id string, at time.Time) {
	defer s.bg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for attempt := 1; attempt <= 3; attempt++ {
		rec, err := s.st.Thread(ctx, id)
		if err != nil {
			return
		}
		_, err = s.st.Commit(ctx, &store.Batch{ThreadID: id, Version: rec.Version,
			Producers: []store.Producer{{Key: accessKey, Epoch: s.tag, Seq: at.UnixMilli()}}})
		if !errors.Is(err, store.ErrConflict) {
			if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrClosed) {
				s.log.Warn("record a read of a stream", "stream", id, "err", err)
			}
			return
		}
	}
}

// release looks at the stream id (if not empty) after one of its forks was
// removed: if it was deleted while forks read it and none does any more,
// it is removed, and so on up the chain.
func (s *Service) release(ctx context.Context, id string) {
	for id != "" {
		next := ""
		err := s.locked(ctx, id, func(e *entry, v *view) error {
			next = ""
			if !v.exists || !v.meta.Deleted {
				return nil
			}
			var err error
			next, _, err = s.remove(ctx, e, v)
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
