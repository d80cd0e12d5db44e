package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// sseFrame is one frame of an event stream. Its slices are valid until the
// next call of sseReader.next.
type sseFrame struct {
	id, event, data []byte
}

// sseReader reads frames without decoding their JSON: thousands of them
// share the machine with the server, so they must cost little.
type sseReader struct {
	br       *bufio.Reader
	keepData bool // collect data lines (else they are skipped)
	f        sseFrame
	long     []byte // a line longer than the buffer, put together
}

func newSSEReader(r io.Reader, keepData bool) *sseReader {
	return &sseReader{br: bufio.NewReaderSize(r, 16<<10), keepData: keepData}
}

// line returns the next line without its end.
func (s *sseReader) line() ([]byte, error) {
	l, err := s.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		s.long = append(s.long[:0], l...)
		for err == bufio.ErrBufferFull {
			l, err = s.br.ReadSlice('\n')
			s.long = append(s.long, l...)
		}
		l = s.long
	}
	if err != nil {
		return nil, err
	}
	l = l[:len(l)-1]
	if n := len(l); n > 0 && l[n-1] == '\r' {
		l = l[:n-1]
	}
	return l, nil
}

// next returns the next frame (comments are skipped).
func (s *sseReader) next() (*sseFrame, error) {
	f := &s.f
	f.id, f.event, f.data = f.id[:0], f.event[:0], f.data[:0]
	seen := false
	for {
		l, err := s.line()
		if err != nil {
			return nil, err
		}
		switch {
		case len(l) == 0:
			if seen {
				return f, nil
			}
		case l[0] == ':':
		case bytes.HasPrefix(l, []byte("id: ")):
			f.id, seen = append(f.id, l[4:]...), true
		case bytes.HasPrefix(l, []byte("event: ")):
			f.event, seen = append(f.event, l[7:]...), true
		case bytes.HasPrefix(l, []byte("data: ")):
			if s.keepData {
				f.data = append(f.data, l[6:]...)
			}
			seen = true
		}
	}
}

// isEvent reports whether a frame is a log event (not connected, a
// snapshot, a ping or a reconnect, which carry no id or are not events).
func (f *sseFrame) isEvent() bool {
	return len(f.id) > 0 && string(f.event) != "snapshot"
}

// subscriber follows a thread's events over SSE from the tail, as a client
// would: it resumes with Last-Event-ID when the server ends the stream
// (a slow consumer, the max lifetime), and checks that offsets strictly
// increase.
type subscriber struct {
	api      *apiClient
	path     string // GET path, with ?after=now
	keepData bool
	onEvent  func(f *sseFrame, now time.Time) // called for each event, if set

	connected chan struct{} // closed when the first stream is open, or run ends
	once      sync.Once
	received  atomic.Int64
	last      []byte // offset of the last event
	disorder  int64  // events whose offset was not after the last
	resumes   int64  // reconnections
	err       error  // why the first connection failed, if it did
}

func newSubscriber(api *apiClient, thread string, keepData bool) *subscriber {
	return &subscriber{api: api, path: "/v1/threads/" + thread + "/events?after=now", keepData: keepData, connected: make(chan struct{})}
}

// open starts a stream, from the tail or, once an event came, after it.
func (s *subscriber) open(ctx context.Context) (*http.Response, error) {
	p, err := s.api.prepare(http.MethodGet, s.path, "Accept", "text/event-stream")
	if err != nil {
		return nil, err
	}
	if len(s.last) > 0 {
		p.h.Set("Last-Event-ID", string(s.last))
	}
	req := &http.Request{Method: p.method, URL: p.u, Host: p.u.Host, Header: p.h, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
	res, err := s.api.streams.RoundTrip(req.WithContext(ctx))
	if err != nil {
		return nil, s.api.transportErr(err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		res.Body.Close()
		return nil, serverErr(res.StatusCode, b)
	}
	return res, nil
}

func (s *subscriber) markConnected() { s.once.Do(func() { close(s.connected) }) }

// run reads streams until ctx is done.
func (s *subscriber) run(ctx context.Context) {
	defer s.markConnected()
	first := true
	for ctx.Err() == nil {
		res, err := s.open(ctx)
		if err != nil {
			if first {
				s.err = err
				return
			}
			s.resumes++
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		s.read(ctx, res.Body, &first)
		res.Body.Close()
		if ctx.Err() == nil {
			s.resumes++
		}
	}
}

func (s *subscriber) read(ctx context.Context, body io.Reader, first *bool) {
	r := newSSEReader(body, s.keepData)
	for {
		f, err := r.next()
		if err != nil {
			return
		}
		switch {
		case f.isEvent():
			if bytes.Compare(f.id, s.last) <= 0 {
				s.disorder++
			}
			s.last = append(s.last[:0], f.id...)
			if s.onEvent != nil {
				s.onEvent(f, time.Now())
			}
			s.received.Add(1)
		case string(f.event) == "connected":
			if *first {
				*first = false
				s.markConnected()
			}
		case string(f.event) == "reconnect":
			return
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// openSubscribers starts n subscribers of a thread and waits until every
// stream is open. The subscribers stop when ctx is done.
func (b *bencher) openSubscribers(ctx context.Context, thread string, n int, keepData bool, onEvent func(*sseFrame, time.Time)) ([]*subscriber, func(), error) {
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	subs := make([]*subscriber, n)
	var running atomic.Int64
	running.Store(int64(n))
	for i := range subs {
		subs[i] = newSubscriber(b.api, thread, keepData)
		subs[i].onEvent = onEvent
	}
	// Open them a few at a time: a thousand dials at once overflow the
	// server's accept queue on a small machine.
	sem := make(chan struct{}, 32)
	go func() {
		for _, s := range subs {
			sem <- struct{}{}
			go func() {
				go func() {
					<-s.connected
					<-sem
				}()
				s.run(sctx)
				if running.Add(-1) == 0 {
					close(done)
				}
			}()
		}
	}()
	stop := func() {
		cancel()
		<-done
	}
	for _, s := range subs {
		select {
		case <-s.connected:
		case <-ctx.Done():
			stop()
			return nil, nil, ctx.Err()
		}
		if s.err != nil {
			stop()
			return nil, nil, duringBench("subscribe", s.err)
		}
	}
	return subs, stop, nil
}

// drainTime is how long to wait for subscribers to get the last events:
// d, or a second once the bench was interrupted.
func drainTime(ctx context.Context, d time.Duration) time.Duration {
	if ctx.Err() != nil {
		return time.Second
	}
	return d
}
