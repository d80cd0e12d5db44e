package sqlitestore

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// A request is one unit of work for the writer: a batch, a thread deletion
// or a checkpoint. Its caller waits on done.
type request struct {
	ctx context.Context
	// check validates the request against the thread's state and writes
	// nothing; write then applies it. A write can only fail on a key
	// conflict (a run's idempotency key: then savepoint is set, and the
	// write is undone alone) or on a fault that breaks the transaction.
	check     func(s *Store, r *request) error
	write     func(s *Store, r *request) error
	savepoint bool
	weight    int // events, for MaxBatchEvents

	// state decides who owns the request when the caller's ctx ends: the
	// caller if it abandons the request while still queued (the writer then
	// never touches it), the writer once it has taken it (the caller then
	// waits for done, which never takes longer than one transaction). So no
	// field is ever written while the caller may read it.
	state atomic.Int32
	done  chan struct{}
	err   error

	thread *threadState // set by check

	// commit
	b       *store.Batch
	data    [][]byte     // the events' JSON, offset placeholder included
	runs    []encodedRun // b.Runs, encoded by the caller
	offsets string       // the offsets of the batch, offsetLen bytes each
	before  tether.Offset
	version int64 // thread's version after the batch
	res     *store.Result

	// deletion, checkpoint
	threadID string
	offset   tether.Offset
	ckpt     []byte
}

const (
	stateQueued int32 = iota
	stateTaken
	stateAbandoned
)

// do queues r and waits for the writer to complete it.
func (s *Store) do(r *request) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	r.done = make(chan struct{})
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return store.ErrClosed
	}
	s.queue = append(s.queue, r)
	s.cond.Signal()
	s.mu.Unlock()

	select {
	case <-r.done:
	case <-r.ctx.Done():
		if r.state.CompareAndSwap(stateQueued, stateAbandoned) {
			return r.ctx.Err()
		}
		<-r.done
	}
	return r.err
}

// writeLoop is the one goroutine that writes. Requests queue up while it
// commits, and it takes them all (up to MaxBatchEvents) into the next
// transaction: the more callers wait, the more one fsync serves. Before it
// takes them it lets the goroutines that are about to queue theirs do so
// (see gather).
func (s *Store) writeLoop() {
	defer close(s.writerDone)
	var reqs []*request
	for {
		reqs = s.take(reqs[:0])
		if len(reqs) == 0 {
			return
		}
		s.process(reqs)
		clear(reqs) // let the batches be collected while the writer idles
		if s.walFull.Swap(false) {
			s.restartWAL()
		}
	}
}

// take waits for requests and moves a group of them from the queue to dst.
// It returns no request once the store is closing and the queue is empty.
func (s *Store) take(dst []*request) []*request {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		for len(s.queue) == 0 {
			if s.closing {
				return dst
			}
			s.cond.Wait()
		}
		if len(s.queue) > 1 || s.recentGroup > 1 {
			s.gather()
		}
		weight, n := 0, 0
		for ; n < len(s.queue); n++ {
			r := s.queue[n]
			if len(dst) > 0 && weight+r.weight > s.opts.MaxBatchEvents {
				break
			}
			if r.state.CompareAndSwap(stateQueued, stateTaken) {
				dst = append(dst, r)
				weight += r.weight
			}
		}
		rest := copy(s.queue, s.queue[n:])
		clear(s.queue[rest:])
		s.queue = s.queue[:rest]
		if len(dst) > 0 {
			// A running maximum that decays by an eighth per group.
			s.recentGroup = max(len(dst), s.recentGroup-(s.recentGroup+7)/8)
			return dst
		}
	}
}

// maxGatherYields bounds how long gather holds a transaction back: each
// yield lets every goroutine that is ready to run do so once.
const maxGatherYields = 16

// gather yields the processor, with s.mu released, as long as requests keep
// arriving, so that the next transaction takes them too. A transaction
// costs far more than a batch in it (BEGIN, COMMIT and the WAL frames of
// the pages it changed: about 35 µs against 5 µs for a batch of one event),
// and when the machine is busy the goroutines that are about to queue a
// batch (HTTP handlers between their request and their commit) are ready
// to run but waiting for a processor: without the yields the writer, woken
// by the first of them, took 1.7 to 2.3 requests per transaction from 50
// producers appending one event each; with them, 16 to 18. On an idle
// machine nothing else is ready, the first yield returns at once and the
// queue has not grown, so a lone caller waits no longer than before.
//
// The writer gathers only when more than one request waits or a recent
// group had more than one (recentGroup: the largest recent group, which
// decays by an eighth per group, so that one group that found nothing
// more does not stop the gathering): a lone producer (one thread fanned
// out to many subscribers) would otherwise wait, at each commit, for the
// ready stream goroutines to run first, for nothing. s.mu must be held;
// it is held again on return.
func (s *Store) gather() {
	for range maxGatherYields {
		n := len(s.queue)
		if s.closing || n >= s.opts.MaxBatchEvents {
			return
		}
		s.mu.Unlock()
		runtime.Gosched()
		s.mu.Lock()
		if len(s.queue) == n {
			return
		}
	}
}

// process commits reqs in one transaction. Then it reports the committed
// batches, in order, to the notify function, and completes the callers.
func (s *Store) process(reqs []*request) {
	if err := s.transact(reqs); err != nil {
		s.log.Error("sqlitestore: commit", "path", s.path, "requests", len(reqs), "err", err)
		for _, r := range reqs {
			if r.err == nil {
				r.err = err
			}
		}
	} else {
		s.dirty.Store(true)
	}
	fn := s.notify.Load()
	for _, r := range reqs {
		if r.err == nil && r.b != nil {
			s.committed(r, fn)
		}
		r.err = unavailable(r.err)
		close(r.done)
	}
}

// transact runs reqs in one transaction. A request that fails its check or
// its write alone gets its error in r.err. The error returned means the
// transaction as a whole failed: nothing was committed.
func (s *Store) transact(reqs []*request) (err error) {
	s.txs.Add(1)
	if _, err := s.w.begin.Exec(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			// After some I/O errors SQLite has rolled back already; then
			// this fails harmlessly with "no transaction is active".
			if _, rerr := s.w.rollback.Exec(); rerr != nil {
				s.log.Debug("sqlitestore: rollback", "path", s.path, "err", rerr)
			}
			// The cache may hold the state of batches that are gone.
			clear(s.threads)
			// And rows deferred but not inserted belong to them.
			clear(s.args)
			s.args = s.args[:0]
		}
	}()
	for _, r := range reqs {
		if r.err = r.ctx.Err(); r.err != nil {
			continue
		}
		if r.err = r.check(s, r); r.err != nil {
			continue
		}
		if r.b == nil || r.savepoint {
			// A deletion must find the events it deletes; and a
			// rollback to a savepoint must not take out the events
			// of the batches before it.
			if err := s.insertDeferred(); err != nil {
				return err
			}
		}
		if !r.savepoint {
			if err := r.write(s, r); err != nil {
				r.err = err
				return err
			}
			continue
		}
		if _, err := s.w.savepoint.Exec(); err != nil {
			return fmt.Errorf("savepoint: %w", err)
		}
		if r.err = r.write(s, r); r.err != nil {
			if _, err := s.w.rollbackTo.Exec(); err != nil {
				return fmt.Errorf("rollback batch: %w (after %w)", err, r.err)
			}
		}
		if _, err := s.w.release.Exec(); err != nil {
			return fmt.Errorf("release batch: %w", err)
		}
	}
	if s.commitFault != nil {
		if err := s.commitFault(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
	}
	if err := s.insertDeferred(); err != nil {
		return err
	}
	if _, err := s.w.commit.Exec(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// committed completes a committed batch: it sets the offsets the caller
// reads back, builds the records and hands them to fn.
func (s *Store) committed(r *request, fn *func(*store.Committed)) {
	b := r.b
	recs := make([]*tether.Record, len(b.Events))
	for i, e := range b.Events {
		e.Offset = tether.Offset(r.offsets[i*offsetLen : (i+1)*offsetLen])
		recs[i] = tether.NewRecord(e, r.data[i])
	}
	last := r.before
	if len(recs) > 0 {
		last = recs[len(recs)-1].Offset
	}
	if b.Thread != nil {
		b.Thread.LastOffset = last
	}
	r.res = &store.Result{Records: recs, Before: r.before, Version: r.version}
	if fn != nil && len(recs) > 0 {
		(*fn)(&store.Committed{ThreadID: b.ThreadID, Before: r.before, Records: recs, Events: b.Events})
	}
}
