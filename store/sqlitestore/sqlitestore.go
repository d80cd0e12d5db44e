package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetherhq/tether/store"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Options configures a Store. The zero value is a good default.
type Options struct {
	// Fsync makes every commit survive a power loss (PRAGMA
	// synchronous=FULL: the WAL is synced at each commit). Defaults to
	// false: synchronous=NORMAL, where a commit survives a crash of the
	// process but the last commits may be lost when the machine loses power.
	// Offsets stay safe either way: the epoch changes at every Open.
	Fsync bool
	// MaxBatchEvents caps the events of one group-commit transaction.
	// Defaults to 8192.
	MaxBatchEvents int
	// Logger receives the faults of the store itself: a failed transaction
	// (whose callers also get the error), a failed checkpoint. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock used to pick the epoch (its Unix second; Open
	// waits up to a second for it to pass the stored epoch). Defaults to
	// time.Now.
	Now func() time.Time
}

// Defaults and limits.
const (
	defaultMaxBatchEvents = 8192
	readerConns           = 4
	// busyTimeout covers another process (a backup tool, sqlite3 shell)
	// holding the file briefly; Tether itself never contends with itself.
	busyTimeout = 10 * time.Second
	// maxEpoch keeps offsets at their fixed width (10 epoch digits).
	maxEpoch = 9_999_999_999
	// maxEventID keeps offsets at their fixed width (16 sequence digits).
	maxEventID = 9_999_999_999_999_999
)

// Store is a store.Store in one SQLite file. Create it with Open.
type Store struct {
	path  string
	opts  Options
	log   *slog.Logger
	epoch uint64

	wdb   *sql.DB
	wconn *sql.Conn // the one writer connection; only the writer goroutine uses it
	w     writerStmts

	rdb *sql.DB
	r   readerStmts

	notify atomic.Pointer[func(*store.Committed)]
	closed atomic.Bool

	mu      sync.Mutex
	cond    sync.Cond
	queue   []*request
	closing bool
	// recentGroup is the largest number of requests of a recent
	// transaction, decaying (see gather).
	recentGroup int

	writerDone chan struct{}
	closeOnce  sync.Once
	closeErr   error

	// The checkpointer copies the WAL into the file in the background.
	cdb     *sql.DB
	dirty   atomic.Bool // commits since the last checkpoint
	walFull atomic.Bool // the writer should restart the WAL
	// ckptMu keeps the checkpointer and the writer's restarts apart;
	// lastRestart (writer only) spaces restarts that readers made fail.
	ckptMu      sync.Mutex
	lastRestart time.Time
	// copies of checkpointEvery, walRestartPages and epochSleep, for the
	// tests
	ckptEvery       time.Duration
	walRestartPages int
	sleep           func(time.Duration)
	stopCkpt        chan struct{}
	ckptDone        chan struct{}

	lock *os.File // keeps other processes out; see lockFile

	// txs counts the writer's transactions, committed or not (tests).
	txs atomic.Int64
	// commitFault, if set (tests only), is called at the end of each
	// transaction, before the group's events are inserted; an error it
	// returns fails the transaction as a failed INSERT or COMMIT would.
	commitFault func() error

	// Owned by the writer goroutine.
	lastID  int64 // the highest event id ever assigned
	threads map[string]*threadState
	args    []any // scratch for the arguments of an insert
}

var _ store.Store = (*Store)(nil)

// Open opens the store in the SQLite file at path, creating the file and its
// directory if needed, and starts its writer. Each Open starts a new epoch,
// greater than every earlier one, so offsets handed out after a crash that
// lost unsynced commits never repeat those of the lost events.
func Open(path string, opts Options) (*Store, error) {
	if opts.MaxBatchEvents <= 0 {
		opts.MaxBatchEvents = defaultMaxBatchEvents
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// 0o750: event logs hold conversations; they are nobody else's business.
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	s := &Store{path: abs, opts: opts, log: opts.Logger, threads: make(map[string]*threadState),
		writerDone: make(chan struct{}), stopCkpt: make(chan struct{}), ckptDone: make(chan struct{}),
		ckptEvery: checkpointEvery, walRestartPages: walRestartPages, sleep: epochSleep}
	s.cond.L = &s.mu
	if err := s.open(); err != nil {
		_ = s.closeHandles()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	go s.writeLoop()
	go s.checkpointLoop()
	return s, nil
}

// dsn returns the data source name of the file with the given pragmas.
// The path goes in a file: URI so that no character of it is taken for the
// start of the query string.
func (s *Store) dsn(pragmas ...string) string {
	p := filepath.ToSlash(s.path)
	p = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(p)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // Windows: file:/C:/...
	}
	q := make([]string, 0, len(pragmas))
	for _, pr := range pragmas {
		q = append(q, "_pragma="+pr)
	}
	return "file:" + p + "?" + strings.Join(q, "&")
}

func (s *Store) open() error {
	ctx := context.Background()
	busy := fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds())
	var err error
	if s.lock, err = lockFile(s.path + "-lock"); err != nil {
		return err
	}
	// The writer starts with synchronous=FULL so that the schema and the new
	// epoch are durable before any event of the epoch can be: otherwise a
	// power loss could drop the epoch bump but keep nothing else, and the
	// next Open could hand out the same epoch again within the same second.
	//
	// wal_autocheckpoint(0): the checkpointer goroutine copies the WAL into
	// the file on a connection of its own, off the writer's path.
	//
	// The page caches (8 MiB for the writer, SQLite's default 2 MiB per
	// reader) stay small: SQLite's memory is outside the Go heap, a cache
	// fills up in any burst, and what it frees is kept mapped by the
	// allocator for reuse, so the process holds its caches' full size for
	// good. The writer's working set is the tails of the tables and their
	// indexes; the file itself is in the OS's cache. 32 + 4 × 8 MiB cost
	// 46 MiB of resident memory for nothing measurable (docs/benchmarks.md,
	// "Memory after a burst").
	s.wdb, err = sql.Open("sqlite", s.dsn(busy, "journal_mode(WAL)", "synchronous(FULL)",
		"wal_autocheckpoint(0)", "journal_size_limit(67108864)", "cache_size(-8192)", "temp_store(MEMORY)"))
	if err != nil {
		return err
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetMaxIdleConns(1)
	s.wdb.SetConnMaxLifetime(0)
	s.wdb.SetConnMaxIdleTime(0)
	if s.wconn, err = s.wdb.Conn(ctx); err != nil {
		return err
	}
	if err := s.migrate(ctx); err != nil {
		return err
	}
	if err := s.bumpEpoch(ctx); err != nil {
		return err
	}
	if err := s.wconn.QueryRowContext(ctx, sqlLastEventID).Scan(&s.lastID); err != nil {
		return fmt.Errorf("read last event id: %w", err)
	}
	syncMode := "NORMAL"
	if s.opts.Fsync {
		syncMode = "FULL"
	}
	if _, err := s.wconn.ExecContext(ctx, "PRAGMA synchronous = "+syncMode); err != nil {
		return err
	}
	if err := s.w.prepare(ctx, s.wconn); err != nil {
		return err
	}

	// Readers never write: query_only turns a bug into an error instead of
	// a second writer racing the first for the lock.
	s.rdb, err = sql.Open("sqlite", s.dsn(busy, "query_only(1)", "cache_size(-2048)", "temp_store(MEMORY)"))
	if err != nil {
		return err
	}
	s.rdb.SetMaxOpenConns(readerConns)
	s.rdb.SetMaxIdleConns(readerConns)
	s.rdb.SetConnMaxLifetime(0)
	s.rdb.SetConnMaxIdleTime(0)
	if err := s.r.prepare(ctx, s.rdb); err != nil {
		return err
	}

	s.cdb, err = sql.Open("sqlite", s.dsn(busy))
	if err != nil {
		return err
	}
	s.cdb.SetMaxOpenConns(1)
	return nil
}

func (s *Store) migrate(ctx context.Context) error {
	var v int
	if err := s.wconn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if v > schemaVersion {
		return fmt.Errorf("schema version %d is newer than this build knows (%d)", v, schemaVersion)
	}
	if v == schemaVersion {
		return nil
	}
	return s.inTx(ctx, func() error {
		if v == 0 {
			for _, q := range schema {
				if _, err := s.wconn.ExecContext(ctx, q); err != nil {
					return fmt.Errorf("create schema: %w", err)
				}
			}
		}
		for ; v > 0 && v < schemaVersion; v++ {
			for _, q := range migrations[v] {
				if _, err := s.wconn.ExecContext(ctx, q); err != nil {
					return fmt.Errorf("migrate schema from version %d: %w", v, err)
				}
			}
		}
		_, err := s.wconn.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion))
		return err
	})
}

// bumpEpoch picks the epoch of this Open: greater than the stored one, so
// that it always grows, and at least the clock in seconds, so that it also
// grows when the file was restored from a backup holding an older epoch.
func (s *Store) bumpEpoch(ctx context.Context) error {
	// No other connection writes (the lock keeps other processes out):
	// the epoch read here is still the stored one in the transaction.
	var stored int64
	err := s.wconn.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'epoch'`).Scan(&stored)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read epoch: %w", err)
	}
	epoch := s.nextEpoch(stored)
	if epoch > maxEpoch {
		return fmt.Errorf("epoch %d is out of range", epoch)
	}
	return s.inTx(ctx, func() error {
		if _, err := s.wconn.ExecContext(ctx,
			`INSERT INTO meta (key, value) VALUES ('epoch', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
			epoch); err != nil {
			return fmt.Errorf("write epoch: %w", err)
		}
		s.epoch = uint64(epoch)
		return nil
	})
}

// maxEpochWait is the longest Open waits for the clock to pass the stored
// epoch (see nextEpoch).
const maxEpochWait = 2 * time.Second

// epochSleep is how Open waits for the clock (tests: SetSleep).
var epochSleep = time.Sleep

// nextEpoch picks the epoch of this Open: the clock's Unix second, once it
// is past the stored epoch. An Open within the second of the one before
// waits for the next second instead of taking stored+1: were the epoch
// let run ahead of the clock (a crash loop opens the store many times a
// second), a backup restored later would number its events with the
// epochs the server that went on from it had used, and hand out its
// offsets again. Kept to the clock, every epoch of that server is at most
// the second of its last start, below the restored copy's.
//
// A stored epoch more than maxEpochWait ahead (the clock was set back, or
// an older build let it run ahead) is not waited for: the epoch is the
// stored one plus one, and the clock's lag is logged.
func (s *Store) nextEpoch(stored int64) int64 {
	now := s.opts.Now()
	if now.Unix() > stored {
		return now.Unix()
	}
	wait := time.Unix(stored+1, 0).Sub(now)
	if wait > maxEpochWait {
		s.log.Warn("the clock is behind the store's epoch: the new epoch is ahead of it",
			"stored_epoch", stored, "clock", now.Unix())
		return stored + 1
	}
	s.sleep(wait)
	return max(stored+1, s.opts.Now().Unix())
}

func (s *Store) inTx(ctx context.Context, fn func() error) error {
	if _, err := s.wconn.ExecContext(ctx, sqlBegin); err != nil {
		return err
	}
	if err := fn(); err != nil {
		_, _ = s.wconn.ExecContext(ctx, sqlRollback)
		return err
	}
	_, err := s.wconn.ExecContext(ctx, sqlCommit)
	return err
}

// Epoch returns the epoch of this Open: the first part of every offset
// assigned since.
func (s *Store) Epoch() uint64 { return s.epoch }

// SetNotify implements store.Store. fn runs on the writer goroutine, so
// while it runs no other batch commits.
func (s *Store) SetNotify(fn func(*store.Committed)) {
	if fn == nil {
		s.notify.Store(nil)
		return
	}
	s.notify.Store(&fn)
}

// Close implements store.Store: it refuses new calls, commits the batches
// already queued, checkpoints the WAL into the main file (so that the file
// alone is a complete copy) and closes the file. A second Close returns nil.
func (s *Store) Close() error {
	first := false
	s.closeOnce.Do(func() {
		first = true
		s.closed.Store(true)
		s.mu.Lock()
		s.closing = true
		s.cond.Broadcast()
		s.mu.Unlock()
		<-s.writerDone
		close(s.stopCkpt)
		<-s.ckptDone
		if _, err := s.wconn.ExecContext(context.Background(), sqlCheckpointWAL); err != nil {
			// Not fatal: the WAL is replayed at the next Open.
			s.log.Warn("sqlitestore: checkpoint WAL at close", "path", s.path, "err", err)
		}
		s.closeErr = s.closeHandles()
	})
	if !first {
		return nil
	}
	return s.closeErr
}

func (s *Store) closeHandles() error {
	var errs []error
	s.r.close()
	s.w.close()
	if s.rdb != nil {
		errs = append(errs, s.rdb.Close())
	}
	if s.cdb != nil {
		errs = append(errs, s.cdb.Close())
	}
	if s.wconn != nil {
		errs = append(errs, s.wconn.Close())
	}
	if s.wdb != nil {
		errs = append(errs, s.wdb.Close())
	}
	if s.lock != nil {
		errs = append(errs, s.lock.Close()) // releases the lock
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close %s: %w", s.path, err)
	}
	return nil
}
