// Package idle bounds how long an upstream stream may stay silent: a
// peer that keeps its connection open and sends nothing would otherwise
// hold a run, and its place in the runner, until someone cancels it.
package idle

import (
	"context"
	"errors"
	"io"
	"time"
)

// ErrTimeout is the cause given to the context of a Reader that waited
// longer than its timeout for a byte.
var ErrTimeout = errors.New("nothing received within the idle timeout")

// Reader reads r and calls cancel(ErrTimeout) when one Read waits for
// longer than its timeout; the read then fails with the request's context.
// Only the time spent waiting in Read counts, not the time the consumer
// takes between reads. Stop it when done. It is not safe for concurrent
// use (one reader, as a response body has).
type Reader struct {
	r io.Reader
	d time.Duration
	t *time.Timer
}

// New returns a Reader over r that calls cancel after d of silence; with
// d <= 0 it never does.
func New(r io.Reader, d time.Duration, cancel context.CancelCauseFunc) *Reader {
	ir := &Reader{r: r, d: d}
	if d > 0 {
		ir.t = time.AfterFunc(time.Hour, func() { cancel(ErrTimeout) })
		ir.t.Stop()
	}
	return ir
}

// Read reads from the underlying reader, within the timeout.
func (r *Reader) Read(p []byte) (int, error) {
	if r.t == nil {
		return r.r.Read(p)
	}
	r.t.Reset(r.d)
	n, err := r.r.Read(p)
	r.t.Stop()
	return n, err
}

// Stop releases the timer.
func (r *Reader) Stop() {
	if r.t != nil {
		r.t.Stop()
	}
}
