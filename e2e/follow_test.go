package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
)

// follower reads one subscription in the background, checking the frames
// and recording everything it gets.
type follower struct {
	name string
	opts followOptions

	connected chan struct{} // closed at the first connected frame
	done      chan struct{} // closed when the follower stopped

	mu     sync.Mutex
	events []seenEvent
	conns  [][]frame // the frames of each connection, in order
	err    error     // a broken promise of the protocol, or a failed resume
	down   bool      // it stopped because the server could not be reached
}

type followOptions struct {
	// After is the cursor of the first connection ("" for none).
	After string
	// Resume reconnects with Last-Event-ID whenever a connection ends,
	// until the server cannot be reached.
	Resume bool
	// UntilRunFinished stops at the first run.finished event.
	UntilRunFinished bool
	// Prior are events received before (by an earlier follower): the
	// first connection resumes after the last of them.
	Prior []seenEvent
}

// follow starts a follower of path (a thread's or a run's events) that
// runs until ctx is done or its options say it is over.
func (s *server) follow(ctx context.Context, name, path string, opts followOptions) *follower {
	f := &follower{name: name, opts: opts, connected: make(chan struct{}), done: make(chan struct{})}
	f.events = append(f.events, opts.Prior...)
	go func() {
		defer close(f.done)
		err := f.run(ctx, s, path)
		f.mu.Lock()
		f.err = err
		f.mu.Unlock()
	}()
	return f
}

func (f *follower) run(ctx context.Context, s *server, path string) error {
	connectedOnce := sync.OnceFunc(func() { close(f.connected) })
	defer connectedOnce()
	for conn := 0; ; conn++ {
		if conn > 300 {
			return errors.New("more than 300 connections")
		}
		p, last := path, f.last()
		if last == "" && f.opts.After != "" {
			p += "?after=" + f.opts.After
		}
		st, err := s.openStream(ctx, p, last)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ue *url.Error // a transport error: the server is gone
			if !errors.As(err, &ue) {
				return fmt.Errorf("connection %d: %w", conn, err)
			}
			f.mu.Lock()
			f.down = true
			f.mu.Unlock()
			return nil
		}
		f.mu.Lock()
		f.conns = append(f.conns, nil)
		f.mu.Unlock()
		before := f.count()
		over, err := f.read(st, last != "" || f.opts.After != "", connectedOnce)
		st.close()
		if err != nil {
			return fmt.Errorf("connection %d: %w", conn, err)
		}
		if over || ctx.Err() != nil || !f.opts.Resume {
			return nil
		}
		if f.count() == before {
			// Nothing came on this connection: don't spin.
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func (f *follower) read(st *stream, cursor bool, connected func()) (over bool, err error) {
	for i := 0; ; i++ {
		fr, err := st.next()
		if err != nil {
			return false, nil
		}
		f.mu.Lock()
		f.conns[len(f.conns)-1] = append(f.conns[len(f.conns)-1], fr)
		f.mu.Unlock()
		switch {
		case i == 0:
			if !fr.IsComment || fr.Comment != "ok" {
				return false, fmt.Errorf("first frame %+v, want the :ok comment", fr)
			}
		case i == 1:
			if fr.Event != "connected" {
				return false, fmt.Errorf("second frame %+v, want connected", fr)
			}
			connected()
		case fr.IsComment || fr.Event == "ping" || fr.Event == "reconnect":
		case fr.Event == "end":
			if fr.HasID || !strings.Contains(fr.Data, `"reason"`) {
				return false, fmt.Errorf("end frame %+v", fr)
			}
		case fr.Event == "snapshot":
			if cursor || i != 2 {
				return false, fmt.Errorf("unexpected snapshot (frame %d, cursor %v): %.200s", i, cursor, fr.Data)
			}
		case fr.Event == "connected":
			return false, errors.New("a second connected frame")
		default:
			e, err := eventOf(fr)
			if err != nil {
				return false, err
			}
			f.mu.Lock()
			if n := len(f.events); n > 0 && e.Offset <= f.events[n-1].Offset {
				f.mu.Unlock()
				return false, fmt.Errorf("event %s %s after %s: out of order or repeated", e.Offset, e.Type, f.events[n-1].Offset)
			}
			f.events = append(f.events, e)
			f.mu.Unlock()
			if f.opts.UntilRunFinished && e.Type == "run.finished" {
				return true, nil
			}
		}
	}
}

// wait waits until the follower stopped and returns its error.
func (f *follower) wait() error {
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *follower) seen() []seenEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenEvent(nil), f.events...)
}

func (f *follower) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.events)
}

// last is the offset of the last event received, or "".
func (f *follower) last() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.events); n > 0 {
		return f.events[n-1].Offset
	}
	return ""
}

// connections returns the frames of each connection.
func (f *follower) connections() [][]frame {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([][]frame, len(f.conns))
	for i, c := range f.conns {
		out[i] = append([]frame(nil), c...)
	}
	return out
}
