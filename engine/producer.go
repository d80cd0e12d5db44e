package engine

import (
	"context"
	"errors"
	"fmt"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// Producer identifies an idempotent append: the Producer-Id,
// Producer-Epoch and Producer-Seq headers, with the rules of the Durable
// Streams protocol. A producer's state is kept per run.
type Producer struct {
	ID    string
	Epoch int64
	Seq   int64
}

// MaxProducerNumber is the largest epoch or sequence number (2^53-1, so
// that JavaScript clients can hold it exactly).
const MaxProducerNumber = 1<<53 - 1

// Check reports whether the producer's fields are well formed.
func (p Producer) Check() error {
	switch {
	case p.ID == "" || len(p.ID) > 255:
		return tether.Errorf(tether.CodeBadRequest, "Producer-Id must be 1 to 255 bytes")
	case p.Epoch < 0 || p.Epoch > MaxProducerNumber:
		return tether.Errorf(tether.CodeBadRequest, "Producer-Epoch must be an integer from 0 to 2^53-1")
	case p.Seq < 0 || p.Seq > MaxProducerNumber:
		return tether.Errorf(tether.CodeBadRequest, "Producer-Seq must be an integer from 0 to 2^53-1")
	}
	return nil
}

// ProducerError is an append refused because of its producer headers. It
// unwraps to a *tether.Error: conflict for a gap in the sequence, forbidden
// for a stale epoch, bad_request for a new epoch that does not start at 0.
type ProducerError struct {
	Err *tether.Error
	// Epoch is the producer's current epoch (for a stale epoch).
	Epoch int64
	// ExpectedSeq and ReceivedSeq describe a gap.
	ExpectedSeq, ReceivedSeq int64
}

func (e *ProducerError) Error() string { return e.Err.Error() }

// Unwrap returns the *tether.Error.
func (e *ProducerError) Unwrap() error { return e.Err }

// producerKey names a producer's state within its thread.
func producerKey(runID, producerID string) string { return runID + "/" + producerID }

// producerState returns the current state of a producer, loading it from
// the store if this process has not seen it (nil: it never appended), and
// the generation of the thread's speculative state it was read in. A state
// loaded from the store is only good for that generation: a rebuild (after
// another node wrote to the thread) may have left the store ahead of it.
func (e *Engine) producerState(ctx context.Context, t *thread, key string) (*store.Producer, int64, error) {
	t.wmu.Lock()
	p, ok := t.producers[key]
	gen := t.gen
	t.wmu.Unlock()
	if ok {
		return p, gen, nil
	}
	p, err := e.st.Producer(ctx, t.id, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, gen, nil
	}
	if err != nil {
		return nil, gen, e.storeErr(err, "producer")
	}
	return p, gen, nil
}

// errProducerReload says a producer's state was loaded before the thread's
// state was rebuilt: load it again and retry.
var errProducerReload = errors.New("engine: producer state loaded before a rebuild")

// maxProducerReloads bounds the retries of one append after rebuilds.
const maxProducerReloads = 8

// checkProducer applies the producer rules. It returns dup true for a
// duplicate (the append is already in the log), or the state to commit.
func checkProducer(cur *store.Producer, key string, p Producer) (dup bool, next *store.Producer, err error) {
	switch {
	case cur == nil && p.Seq != 0:
		return false, nil, &ProducerError{Err: tether.Errorf(tether.CodeConflict,
			"producer %q has not appended yet: Producer-Seq must be 0, got %d", p.ID, p.Seq), ExpectedSeq: 0, ReceivedSeq: p.Seq}
	case cur == nil:
	case p.Epoch < cur.Epoch:
		return false, nil, &ProducerError{Err: tether.Errorf(tether.CodeForbidden,
			"Producer-Epoch %d of producer %q is stale: its epoch is %d", p.Epoch, p.ID, cur.Epoch), Epoch: cur.Epoch}
	case p.Epoch > cur.Epoch && p.Seq != 0:
		return false, nil, &ProducerError{Err: tether.Errorf(tether.CodeBadRequest,
			"a new Producer-Epoch must start at Producer-Seq 0, got %d", p.Seq)}
	case p.Epoch > cur.Epoch:
	case p.Seq <= cur.Seq:
		return true, nil, nil
	case p.Seq > cur.Seq+1:
		return false, nil, &ProducerError{Err: tether.Errorf(tether.CodeConflict,
			"Producer-Seq %d of producer %q leaves a gap: expected %d", p.Seq, p.ID, cur.Seq+1),
			ExpectedSeq: cur.Seq + 1, ReceivedSeq: p.Seq}
	}
	return false, &store.Producer{Key: key, Epoch: p.Epoch, Seq: p.Seq}, nil
}

func (e *ProducerError) String() string {
	return fmt.Sprintf("%v (epoch %d, expected %d, received %d)", e.Err, e.Epoch, e.ExpectedSeq, e.ReceivedSeq)
}
