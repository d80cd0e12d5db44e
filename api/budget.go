package api

import (
	"container/list"
	"context"
	"sync"
)

// budget is the server-wide allowance of request-body bytes in flight
// (Limits.BodyBytes), with a cap on what one principal holds of it
// (Limits.BodyBytesPerPrincipal): a weighted semaphore whose waiters are
// served in turn across principals, and in order within each.
//
// Why the budget: a body is held several times while it is handled (the
// bytes read, the JSON decoder's copy, the decoded events, their encoding
// for the store, the run's state), so that 24 appends of 4 MiB at once
// took a server from 24 MiB to 630 MiB. Bounding the bytes in flight
// bounds that part, whatever the number of clients (345 MiB at the
// default: docs/benchmarks.md, "Large bodies at once").
//
// Why the share and the turns: first come, first served, one principal
// could hold the whole budget by announcing large bodies and sending them
// slowly (each within Limits.BodyTimeout, then again), and every other
// principal's writes waited, then failed. With the share, the rest of the
// budget stays for the others; with the turns, a principal with many
// requests waiting does not make one with a single request wait behind all
// of them.
type budget struct {
	size  int64
	share int64 // most bytes one principal holds, unless it holds none; <= 0: no cap

	mu   sync.Mutex
	used int64
	// held is the bytes each principal with a share holds (only those
	// holding some): not the key "", nor any key without a share.
	held map[string]int64
	// queues is each principal's waiting requests (only those with some);
	// turns is those principals in the order they are served in.
	queues  map[string]*budgetQueue
	turns   list.List // of *budgetQueue
	waiting int       // requests in every queue
}

// budgetQueue is one principal's requests waiting, in arrival order.
type budgetQueue struct {
	key     string
	waiters list.List // of *budgetWaiter
	turn    *list.Element
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed once the bytes are granted
}

func newBudget(size, share int64) *budget {
	return &budget{size: size, share: share, held: make(map[string]int64), queues: make(map[string]*budgetQueue)}
}

// withinShare reports whether key may take n more bytes under its share:
// a principal that holds nothing may always take one body, so that any
// body allowed can pass. The key "" (a request not limited: quotaKey) has
// no share. b.mu is held.
func (b *budget) withinShare(key string, n int64) bool {
	if b.share <= 0 || key == "" {
		return true
	}
	h := b.held[key]
	return h == 0 || h+n <= b.share
}

// take hands n bytes to key; b.mu is held.
func (b *budget) take(key string, n int64) {
	b.used += n
	if b.share > 0 && key != "" {
		b.held[key] += n
	}
}

// giveBack returns n bytes of key's; b.mu is held.
func (b *budget) giveBack(key string, n int64) {
	b.used -= n
	if b.share <= 0 || key == "" {
		return
	}
	if h := b.held[key] - n; h > 0 {
		b.held[key] = h
	} else {
		delete(b.held, key)
	}
}

// acquire takes n bytes of the budget for the principal key (n is capped
// at the budget's size, so that any one body can pass alone), waiting
// while they are not free or key is over its share. It returns the
// function that gives them back, which may be called more than once, or
// ctx's error if ctx ends first; overShare then says whether key was over
// its share at that moment (rather than the budget being full).
func (b *budget) acquire(ctx context.Context, key string, n int64) (release func(), overShare bool, err error) {
	n = min(n, b.size)
	b.mu.Lock()
	if b.waiting == 0 && b.used+n <= b.size && b.withinShare(key, n) {
		b.take(key, n)
		b.mu.Unlock()
		return b.releaser(key, n), false, nil
	}
	q := b.queues[key]
	if q == nil {
		q = &budgetQueue{key: key}
		q.turn = b.turns.PushBack(q)
		b.queues[key] = q
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	el := q.waiters.PushBack(w)
	b.waiting++
	// Others waiting may be over their shares: this request may be the
	// one to serve now.
	b.grant()
	b.mu.Unlock()
	select {
	case <-w.ready:
		return b.releaser(key, n), false, nil
	case <-ctx.Done():
		b.mu.Lock()
		select {
		case <-w.ready:
			// Granted as ctx ended: give the bytes back.
			b.giveBack(key, n)
		default:
			overShare = !b.withinShare(key, n)
			q.waiters.Remove(el)
			b.waiting--
			if q.waiters.Len() == 0 {
				b.turns.Remove(q.turn)
				delete(b.queues, key)
			}
		}
		b.grant()
		b.mu.Unlock()
		return nil, overShare, ctx.Err()
	}
}

// tryAcquire takes n bytes (capped as in acquire) for key if they are
// free, within key's share, and nobody waits, without waiting: the common
// case, which then needs no deadline of its own.
func (b *budget) tryAcquire(key string, n int64) (release func(), ok bool) {
	n = min(n, b.size)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiting > 0 || b.used+n > b.size || !b.withinShare(key, n) {
		return nil, false
	}
	b.take(key, n)
	return b.releaser(key, n), true
}

func (b *budget) releaser(key string, n int64) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			b.giveBack(key, n)
			b.grant()
			b.mu.Unlock()
		})
	}
}

// grant hands free bytes to waiters; b.mu is held. The principals take
// turns, one request each, in the order they started waiting (a
// principal served goes to the back); a principal over its share is passed
// over, as only its own bytes coming back can let it in. The first
// principal whose turn it is and whose request does not fit the free
// bytes stops the round, so that a large body is not starved by a stream
// of small ones.
func (b *budget) grant() {
	for b.waiting > 0 {
		var q *budgetQueue
		for el := b.turns.Front(); el != nil; el = el.Next() {
			c := el.Value.(*budgetQueue)
			if b.withinShare(c.key, c.waiters.Front().Value.(*budgetWaiter).n) {
				q = c
				break
			}
		}
		if q == nil {
			return
		}
		front := q.waiters.Front()
		w := front.Value.(*budgetWaiter)
		if b.used+w.n > b.size {
			return
		}
		b.take(q.key, w.n)
		q.waiters.Remove(front)
		b.waiting--
		close(w.ready)
		b.turns.Remove(q.turn)
		if q.waiters.Len() > 0 {
			q.turn = b.turns.PushBack(q)
		} else {
			delete(b.queues, q.key)
		}
	}
}

// inUse returns the bytes taken (for metrics and tests).
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
