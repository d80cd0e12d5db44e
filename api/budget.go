package api

import (
	"container/list"
	"context"
	"sync"
)

// budget is the server-wide allowance of request-body bytes in flight
// (Limits.BodyBytes): a weighted semaphore whose waiters are served in
// order, so that a large body is not starved by a stream of small ones.
//
// Why: a body is held several times while it is handled (the bytes read,
// the JSON decoder's copy, the decoded events, their encoding for the
// store, the run's state), so that 24 appends of 4 MiB at once took a
// server from 24 MiB to 630 MiB. Bounding the bytes in flight bounds that
// part, whatever the number of clients (345 MiB at the default:
// docs/benchmarks.md, "Large bodies at once").
type budget struct {
	mu      sync.Mutex
	size    int64
	used    int64
	waiters list.List // of *budgetWaiter, in arrival order
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed once the bytes are granted
}

func newBudget(size int64) *budget { return &budget{size: size} }

// acquire takes n bytes of the budget (n is capped at its size, so that
// any one body can pass alone), waiting while they are not free. It
// returns the function that gives them back, which may be called more
// than once, or ctx's error if ctx ends first.
func (b *budget) acquire(ctx context.Context, n int64) (release func(), err error) {
	n = min(n, b.size)
	b.mu.Lock()
	if b.used+n <= b.size && b.waiters.Len() == 0 {
		b.used += n
		b.mu.Unlock()
		return b.releaser(n), nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	el := b.waiters.PushBack(w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return b.releaser(n), nil
	case <-ctx.Done():
		b.mu.Lock()
		select {
		case <-w.ready:
			// Granted as ctx ended: give the bytes back.
			b.used -= n
		default:
			b.waiters.Remove(el)
		}
		b.grant()
		b.mu.Unlock()
		return nil, ctx.Err()
	}
}

// tryAcquire takes n bytes (capped as in acquire) if they are free and
// nobody waits, without waiting: the common case, which then needs no
// deadline of its own.
func (b *budget) tryAcquire(n int64) (release func(), ok bool) {
	n = min(n, b.size)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.size || b.waiters.Len() > 0 {
		return nil, false
	}
	b.used += n
	return b.releaser(n), true
}

func (b *budget) releaser(n int64) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			b.used -= n
			b.grant()
			b.mu.Unlock()
		})
	}
}

// grant hands free bytes to waiters in order; b.mu is held.
func (b *budget) grant() {
	for el := b.waiters.Front(); el != nil; el = b.waiters.Front() {
		w := el.Value.(*budgetWaiter)
		if b.used+w.n > b.size {
			return
		}
		b.used += w.n
		b.waiters.Remove(el)
		close(w.ready)
	}
}

// inUse returns the bytes taken (for metrics and tests).
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
