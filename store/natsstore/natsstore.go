package natsstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/tetherhq/tether/store"
)

// Options configures a Store. The zero value connects to a NATS server on
// localhost with the default names.
type Options struct {
	// URL is the NATS server to connect to (several separated by commas).
	// Ignored when Conn is set. Defaults to nats.DefaultURL.
	URL string
	// Conn is a connection to use instead of dialing URL. Close leaves it
	// open.
	Conn *nats.Conn
	// Stream names the JetStream stream of the thread logs. Defaults to
	// "TETHER".
	Stream string
	// Subject is the subject prefix of the logs: the log of a thread is the
	// subject Subject + "." + a token made from the thread's ID. Defaults to
	// "tether.log".
	Subject string
	// Bucket names the key-value bucket of the metadata (stream
	// "KV_" + Bucket). Defaults to Stream + "_META".
	Bucket string
	// Replicas is the number of replicas of the stream, the bucket and the
	// repair consumer when Open creates them (1 or 3 in practice). Defaults
	// to 1.
	Replicas int
	// Node names this store among those sharing the stream, in logs and in
	// the bucket's fence keys. Defaults to a random ID.
	Node string
	// Timeout bounds each request to JetStream whose context has no
	// deadline. Defaults to 10s.
	Timeout time.Duration
	// RepairDelay is how old a batch committed by another node must be
	// before the repairer checks that its metadata was written (normally
	// its committer did that before its Commit returned). Defaults to 5s.
	RepairDelay time.Duration
	// TombstoneTTL is how long a deleted thread's tombstone stays in the
	// log, and its rows' in the bucket: a node that does not follow the
	// log when a thread is deleted (cut off from NATS) hears of the
	// deletion from its tombstone when it follows the log again, and a
	// late writer of an older batch cannot bring a deleted row back. A
	// node cut off for half of it or longer may have missed a tombstone:
	// once it follows the log again, it says so (store.FeedState.Forget).
	// Defaults to 24h.
	TombstoneTTL time.Duration
	// NoRepair keeps this node from running the repairer (see doc.go).
	// At least one node sharing the stream must run it. Defaults to false.
	NoRepair bool
	// Logger receives the faults of the store itself (a failed metadata
	// write that the repairer will redo, a broken consumer). Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// Defaults.
const (
	defaultStream      = "TETHER"
	defaultSubject     = "tether.log"
	defaultTimeout     = 10 * time.Second
	defaultRepairDelay = 5 * time.Second
	// maxCachedThreads bounds the per-node cache of thread states.
	maxCachedThreads = 1 << 16
	// defaultTombstoneTTL is the default Options.TombstoneTTL: how long the
	// bucket keeps the tombstone of a deleted row, which stops a late
	// writer of an older batch from bringing the row back, and how long
	// the log keeps a deleted thread's tombstone message, which tells a
	// node that did not follow the log when it was published (cut off
	// from NATS, its consumer recreated) of the deletion.
	defaultTombstoneTTL = 24 * time.Hour
)

// Store is a store.Store on NATS JetStream. Create it with Open.
type Store struct {
	opts Options
	log  *slog.Logger

	nc      *nats.Conn
	ownConn bool
	js      jetstream.JetStream

	logStream  jetstream.Stream
	metaStream jetstream.Stream
	logName    string // stream of the logs
	metaName   string // stream of the bucket
	subject    string // "<Subject>."
	kvSubject  string // "$KV.<Bucket>."
	epoch      uint64

	notify atomic.Pointer[func(*store.Committed)]
	// ownDeletes holds the message IDs of this handle's tombstones, so
	// that the notify path reports only the other nodes' deletions.
	ownDeletes sync.Map

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup // Commit and DeleteThread calls
	threads  map[string]*entry
	pending  map[string]*pendingCommit // by message ID

	// delivered is the stream sequence of the last message the notify
	// consumer handled.
	delivered atomic.Uint64
	// notifyIter follows the log; dispatch replaces it when the consumer
	// behind it gave up (restartNotify).
	notifyMu     sync.Mutex
	notifyIter   jetstream.MessagesContext
	dispatchDone chan struct{}

	hintsMu sync.Mutex
	hints   map[string]kvHint

	// repairIter pulls from the repair consumer; repairLoop replaces it
	// when the consumer is gone (restartRepair).
	repairMu   sync.Mutex
	repairIter jetstream.MessagesContext
	repairDone chan struct{}
	// stop is closed when Close starts waiting; stopCtx ends with it.
	stop    chan struct{}
	stopCtx context.Context
	cancel  context.CancelFunc

	// feed says whether the node follows the log (feed.go); watchConn
	// feeds it the connection's status until Close.
	feed      feed
	watchDone chan struct{}

	// awaiting counts the commits waiting for their delivery (see
	// awaitDelivery); late, those that waited longer than Timeout.
	awaiting, late atomic.Int64

	// dieAfterPublish makes commits and deletions stop right after their
	// publish, as if the node died there (tests only).
	dieAfterPublish atomic.Bool
	// holdDelivery, if set, makes the notify consumer wait until it is
	// closed before it handles the next message (tests only).
	holdDelivery atomic.Pointer[chan struct{}]
	// afterLast, if set, runs between the read of a thread's last message
	// and the read of its log (tests only).
	afterLast atomic.Pointer[func(id string)]

	closeOnce sync.Once
	closeErr  error
}

var (
	_ store.Store = (*Store)(nil)
	_ store.Feed  = (*Store)(nil)
)

// Open connects to JetStream, creates the stream, the bucket and the
// repair consumer if they are missing, and starts following the log.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Stream == "" {
		opts.Stream = defaultStream
	}
	if opts.Subject == "" {
		opts.Subject = defaultSubject
	}
	if opts.Bucket == "" {
		opts.Bucket = opts.Stream + "_META"
	}
	if opts.Replicas <= 0 {
		opts.Replicas = 1
	}
	if opts.Node == "" {
		opts.Node = nuid.Next()
	}
	if opts.Timeout <= 0 {
		opts.Timeout = defaultTimeout
	}
	if opts.RepairDelay <= 0 {
		opts.RepairDelay = defaultRepairDelay
	}
	if opts.TombstoneTTL <= 0 {
		opts.TombstoneTTL = defaultTombstoneTTL
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if strings.ContainsAny(opts.Subject, "*> ") || strings.HasSuffix(opts.Subject, ".") {
		return nil, fmt.Errorf("natsstore: subject prefix %q is not a literal subject", opts.Subject)
	}
	s := &Store{opts: opts, log: opts.Logger, threads: make(map[string]*entry), pending: make(map[string]*pendingCommit),
		logName: opts.Stream, metaName: "KV_" + opts.Bucket, subject: opts.Subject + ".", kvSubject: "$KV." + opts.Bucket + ".",
		dispatchDone: make(chan struct{}), repairDone: make(chan struct{}), stop: make(chan struct{}),
		hints: make(map[string]kvHint), feed: feed{timeout: opts.Timeout, forget: opts.TombstoneTTL / 2}, watchDone: make(chan struct{})}
	s.stopCtx, s.cancel = context.WithCancel(context.Background())
	if err := s.open(ctx); err != nil {
		s.cancel()
		s.stopNotify()
		if s.repairIter != nil {
			s.repairIter.Stop()
		}
		if s.ownConn && s.nc != nil {
			s.nc.Close()
		}
		return nil, fmt.Errorf("natsstore: open: %w", err)
	}
	go s.dispatch()
	go s.watchConn()
	if s.repairIter != nil {
		go s.repairLoop()
	} else {
		close(s.repairDone)
	}
	return s, nil
}

func (s *Store) open(ctx context.Context) error {
	s.nc = s.opts.Conn
	if s.nc == nil {
		url := s.opts.URL
		if url == "" {
			url = nats.DefaultURL
		}
		nc, err := nats.Connect(url, nats.Name("tether "+s.opts.Node), nats.MaxReconnects(-1),
			// The connection's events in the server's log, not on stderr.
			nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
				subject := ""
				if sub != nil {
					subject = sub.Subject
				}
				s.log.Warn("natsstore: NATS connection error", "subscription", subject, "err", err)
			}),
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
				s.log.Warn("natsstore: disconnected from NATS; reconnecting", "err", err)
			}),
			nats.ReconnectHandler(func(nc *nats.Conn) {
				s.log.Info("natsstore: reconnected to NATS", "server", nc.ConnectedUrlRedacted())
			}))
		if err != nil {
			return err
		}
		s.nc, s.ownConn = nc, true
	}
	js, err := jetstream.New(s.nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	s.js = js

	s.logStream, err = s.stream(ctx, jetstream.StreamConfig{
		Name:        s.logName,
		Description: "Tether thread logs",
		Subjects:    []string{s.subject + "*"},
		Storage:     jetstream.FileStorage,
		Replicas:    s.opts.Replicas,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxMsgs:     -1, MaxBytes: -1, MaxMsgsPerSubject: -1, MaxMsgSize: -1, MaxConsumers: -1,
		Duplicates:  2 * time.Minute,
		AllowDirect: true,
		DenyDelete:  true,
		// A deletion's tombstone message expires (see DeleteThread).
		AllowMsgTTL: true,
	})
	if err != nil {
		return fmt.Errorf("stream %s: %w", s.logName, err)
	}
	s.metaStream, err = s.stream(ctx, jetstream.StreamConfig{
		Name:              s.metaName,
		Description:       "Tether metadata: a projection of the stream " + s.logName,
		Subjects:          []string{s.kvSubject + ">"},
		Storage:           jetstream.FileStorage,
		Replicas:          s.opts.Replicas,
		MaxMsgsPerSubject: 1, // a key-value bucket without history
		MaxMsgs:           -1, MaxBytes: -1, MaxMsgSize: -1, MaxConsumers: -1,
		Discard:     jetstream.DiscardNew,
		Duplicates:  2 * time.Minute,
		AllowRollup: true,
		DenyDelete:  true,
		AllowMsgTTL: true,
		// The store reads single keys from the leader (a replica may lag
		// behind a write another node made), and bulk reads from any
		// replica, behind a fence (see scan).
		AllowDirect: true,
	})
	if err != nil {
		return fmt.Errorf("bucket %s: %w", s.opts.Bucket, err)
	}

	var info *jetstream.StreamInfo
	err = s.untilReady(ctx, "stream info", func(ctx context.Context) (err error) {
		info, err = s.logStream.Info(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("stream %s: %w", s.logName, err)
	}
	s.epoch = uint64(info.Created.Unix())
	if e, ok := info.Config.Metadata[EpochMetadata]; ok {
		if s.epoch, err = strconv.ParseUint(e, 10, 64); err != nil {
			return fmt.Errorf("stream %s: metadata %s: %w", s.logName, EpochMetadata, err)
		}
	}
	if s.epoch == 0 || s.epoch > maxEpoch {
		return fmt.Errorf("stream %s: epoch %d out of range", s.logName, s.epoch)
	}
	if err := s.untilReady(ctx, "notify consumer", func(ctx context.Context) error { return s.startNotify(ctx, info.State.LastSeq) }); err != nil {
		return fmt.Errorf("notify consumer: %w", err)
	}
	if !s.opts.NoRepair {
		if err := s.untilReady(ctx, "repair consumer", s.startRepair); err != nil {
			return fmt.Errorf("repair consumer: %w", err)
		}
	}
	return nil
}

// EpochMetadata is the key of the stream's metadata that, if set, gives the
// epoch of its offsets instead of the stream's creation time. Set it to the
// current Unix time after restoring the stream from a backup, so that no
// offset handed out before the restore is handed out again.
const EpochMetadata = "tether_epoch"

// stream binds to a stream, creating it if it does not exist.
func (s *Store) stream(ctx context.Context, cfg jetstream.StreamConfig) (st jetstream.Stream, err error) {
	err = s.untilReady(ctx, "stream "+cfg.Name, func(ctx context.Context) error {
		st, err = s.bindStream(ctx, cfg)
		return err
	})
	return st, err
}

// untilReady runs one step of Open until it works, each attempt bounded
// by a few seconds. A cluster that is still forming (no meta leader yet, a
// peer that cannot create its replica yet, requests lost while leaders are
// elected) answers with server errors or not at all: those are retried
// until ctx ends, so that nodes may start with or before the NATS servers.
func (s *Store) untilReady(ctx context.Context, what string, step func(ctx context.Context) error) error {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := step(actx)
		cancel()
		var apiErr *jetstream.APIError
		notReady := unavailable(err) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &apiErr) && apiErr.Code >= 500
		if err == nil || !notReady || ctx.Err() != nil {
			return err
		}
		s.log.Warn("natsstore: JetStream is not ready; retrying", "step", what, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

func (s *Store) bindStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	st, err := s.js.CreateStream(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		st, err = s.js.Stream(ctx, cfg.Name)
		if err == nil {
			got := st.CachedInfo().Config
			if len(got.Subjects) != 1 || got.Subjects[0] != cfg.Subjects[0] || got.MaxMsgsPerSubject != cfg.MaxMsgsPerSubject {
				return nil, fmt.Errorf("exists with subjects %v and %d messages per subject, want %v and %d",
					got.Subjects, got.MaxMsgsPerSubject, cfg.Subjects, cfg.MaxMsgsPerSubject)
			}
			if err := dropsMessages(got); err != nil {
				return nil, err
			}
			st, err = s.enable(ctx, st, got, cfg)
		}
	}
	return st, err
}

// dropsMessages refuses an existing stream under whose settings JetStream
// removes messages by itself: an age, a count or a size of the stream, or
// a retention other than limits (interest or work queue: acknowledged
// messages go). The log would lose events acknowledged as durable, and
// the bucket rows. Tether never sets any of them; an operator who did
// must remove them (nats stream edit) rather than have Tether do it
// silently.
func dropsMessages(c jetstream.StreamConfig) error {
	var set []string
	if c.Retention != jetstream.LimitsPolicy {
		set = append(set, "retention "+c.Retention.String())
	}
	if c.MaxAge > 0 {
		set = append(set, "max_age "+c.MaxAge.String())
	}
	if c.MaxMsgs > 0 {
		set = append(set, fmt.Sprintf("max_msgs %d", c.MaxMsgs))
	}
	if c.MaxBytes > 0 {
		set = append(set, fmt.Sprintf("max_bytes %d", c.MaxBytes))
	}
	if len(set) > 0 {
		return fmt.Errorf("exists with %s: JetStream would drop messages by itself; remove the limit from the stream", strings.Join(set, ", "))
	}
	return nil
}

// enable turns on, in an existing stream, the features the store uses that
// cfg has and it lacks (a bucket made by another tool, such as the nats
// CLI's "kv add", has neither): per-message TTLs, without which no row
// can be deleted, and direct gets, which bulk reads use. Both only add
// what a request may ask for; the stream's other settings stay its own.
func (s *Store) enable(ctx context.Context, st jetstream.Stream, got, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	if (got.AllowMsgTTL || !cfg.AllowMsgTTL) && (got.AllowDirect || !cfg.AllowDirect) {
		return st, nil
	}
	s.log.Info("natsstore: enabling what the store needs in an existing stream", "stream", cfg.Name,
		"allow_msg_ttl", !got.AllowMsgTTL && cfg.AllowMsgTTL, "allow_direct", !got.AllowDirect && cfg.AllowDirect)
	got.AllowMsgTTL = got.AllowMsgTTL || cfg.AllowMsgTTL
	got.AllowDirect = got.AllowDirect || cfg.AllowDirect
	st, err := s.js.UpdateStream(ctx, got)
	if err != nil {
		return nil, fmt.Errorf("exists without per-message TTLs or direct gets, and enabling them failed: %w", err)
	}
	return st, nil
}

// Epoch returns the epoch of the offsets this store hands out.
func (s *Store) Epoch() uint64 { return s.epoch }

// SetNotify implements store.Store.
func (s *Store) SetNotify(fn func(*store.Committed)) {
	if fn == nil {
		s.notify.Store(nil)
		return
	}
	s.notify.Store(&fn)
}

// begin registers a write; it fails once the store is closing.
func (s *Store) begin() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	s.inflight.Add(1)
	return nil
}

// awaitDispatch waits for dispatch to return after stopNotify. An ordered
// consumer stopped while it recreates itself (its server just came back)
// can miss the stop: the pull it makes then goes on, and dispatch waits in
// it for ever (seen once in a hundred restarts of a test's server). So the
// stop is made again after the store's timeout, and then the connection,
// if the store made it, is closed, which ends every pull.
func (s *Store) awaitDispatch() {
	select {
	case <-s.dispatchDone:
		return
	case <-time.After(s.opts.Timeout):
	}
	s.log.Warn("natsstore: the log's consumer did not stop in time; stopping it again")
	s.stopNotify()
	if s.ownConn {
		s.nc.Close()
		<-s.dispatchDone
		return
	}
	select {
	case <-s.dispatchDone:
	case <-time.After(s.opts.Timeout):
		s.log.Error("natsstore: the log's consumer did not stop; it stops with the connection")
	}
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close implements store.Store: it waits for the Commit and DeleteThread
// calls in flight, then stops following the log and closes the connection
// if Open made it.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.inflight.Wait()
		close(s.stop)
		s.cancel()
		if it := s.repairIterator(); it != nil {
			it.Drain() // the loop hands back what it holds
			select {
			case <-s.repairDone:
			case <-time.After(s.opts.Timeout):
				// A drain ends when the server confirms it; with the
				// server gone that never comes, and Close must not wait
				// for ever (the messages come back after AckWait).
				s.log.Warn("natsstore: the repair consumer did not drain in time; stopping it")
				it.Stop()
			}
		}
		<-s.repairDone
		s.stopNotify()
		s.awaitDispatch()
		<-s.watchDone
		s.feed.close()
		if s.ownConn {
			s.nc.Close()
		}
	})
	return s.closeErr
}

// readErr maps a failed read: ErrClosed once the store is closed, the
// context's error as is, else the error with what was being read.
func (s *Store) readErr(what string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrOffsetNotFound), errors.Is(err, store.ErrClosed):
		return err
	case s.isClosed():
		return store.ErrClosed
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	if unavailable(err) {
		return fmt.Errorf("natsstore: %s: %w: %w", what, store.ErrUnavailable, err)
	}
	return fmt.Errorf("natsstore: %s: %w", what, err)
}

// unavailable reports whether err says NATS or JetStream could not answer
// (no connection, no responders, a timeout, a stream without a leader)
// rather than that the request was wrong.
func unavailable(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.Code == 503 {
		return true
	}
	for _, e := range []error{nats.ErrTimeout, nats.ErrNoResponders, nats.ErrConnectionClosed,
		nats.ErrConnectionDraining, nats.ErrConnectionReconnecting, nats.ErrDisconnected,
		jetstream.ErrNoHeartbeat, jetstream.ErrJetStreamNotEnabled} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (s *Store) logSubject(threadID string) string { return s.subject + token(threadID) }
