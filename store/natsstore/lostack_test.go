package natsstore_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/natsstore/natstest"
)

// ackProxy forwards NATS connections to a server. While held, what the
// server sends is kept back (acks of publishes, answers of requests),
// while what the client sends still goes through: a publish is stored but
// its ack does not come. A hold ends with release, or by itself once the
// client sends a request whose subject holds releaseOn.
type ackProxy struct {
	addr      string
	mu        sync.Mutex
	cond      *sync.Cond
	held      bool
	releaseOn []byte
}

func startAckProxy(t *testing.T, target string) *ackProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &ackProxy{addr: ln.Addr().String()}
	p.cond = sync.NewCond(&p.mu)
	var wg sync.WaitGroup
	var conns []net.Conn
	var cmu sync.Mutex
	t.Cleanup(func() {
		_ = ln.Close()
		p.release()
		cmu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		cmu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			cmu.Lock()
			conns = append(conns, c, s)
			cmu.Unlock()
			wg.Go(func() { p.toServer(c, s) })
			wg.Go(func() { p.toClient(s, c) })
		}
	})
	return p
}

// hold keeps back what the server sends until release, or until the
// client sends releaseOn.
func (p *ackProxy) hold(releaseOn string) {
	p.mu.Lock()
	p.held, p.releaseOn = true, []byte(releaseOn)
	p.mu.Unlock()
}

func (p *ackProxy) release() {
	p.mu.Lock()
	p.held = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *ackProxy) toServer(c, s net.Conn) {
	defer s.Close()
	buf := make([]byte, 32<<10)
	var tail []byte // the end of the last read, for a subject cut between two
	for {
		n, err := c.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if p.held && len(p.releaseOn) > 0 && bytes.Contains(append(tail, buf[:n]...), p.releaseOn) {
				p.held = false
				p.cond.Broadcast()
			}
			p.mu.Unlock()
			tail = append(tail[:0], buf[max(0, n-64):n]...)
			if _, err := s.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *ackProxy) toClient(s, c net.Conn) {
	defer c.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Read(buf)
		p.mu.Lock()
		for p.held {
			p.cond.Wait()
		}
		p.mu.Unlock()
		if n > 0 {
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// A publish whose ack does not come in time is not taken for a failure:
// the store looks at the message after the expected one on the thread's
// subject, finds its own (by its message ID), and the commit succeeds,
// stored once.
func TestCommitAckLostFoundStored(t *testing.T) {
	srv := natstest.StartServer(t)
	p := startAckProxy(t, srv.Addr().String())
	opts := optionsFor("nats://"+p.addr, t.TempDir(), 1)
	opts.Timeout = time.Second
	opts.RepairDelay = time.Hour
	st := node(t, opts, "a")
	defer st.Close() // before the proxy and the server stop
	mustCommit(t, st, createBatch(t, "t", 1))

	// The ack is kept back until the store asks for the message after
	// the one it expected: it asks once its publish timed out.
	p.hold("STREAM.MSG.GET")
	mustCommit(t, st, appendBatch(t, "t", 1, 1, "once"))
	if tr, err := st.Thread(ctx, "t"); err != nil || tr.Version != 2 {
		t.Fatalf("thread %+v, %v: want version 2", tr, err)
	}
	recs, err := st.ReadEvents(ctx, "t", "-1", 100)
	if err != nil || len(recs) != 2 {
		t.Fatalf("%d events, %v: want 2", len(recs), err)
	}
	mustCommit(t, st, appendBatch(t, "t", 2, 1, "next"))
}

// A publish whose outcome stays unknown (no ack, and no answer to the
// look for it, for three times the store's timeout) fails with the
// context's deadline, which the engine answers 503 unavailable "its
// outcome is unknown". It was stored: the client's retry of the batch, at
// the thread's version before it, is refused ErrConflict by the stream's
// expected sequence, and the engine, catching up, finds the batch in the
// log. Nothing is stored twice.
func TestCommitOutcomeUnknown(t *testing.T) {
	srv := natstest.StartServer(t)
	p := startAckProxy(t, srv.Addr().String())
	opts := optionsFor("nats://"+p.addr, t.TempDir(), 1)
	opts.Timeout = 300 * time.Millisecond
	opts.RepairDelay = time.Hour
	st := node(t, opts, "a")
	defer st.Close()
	mustCommit(t, st, createBatch(t, "t", 1))

	p.hold("")
	_, err := st.Commit(ctx, appendBatch(t, "t", 1, 1, "lost"))
	p.release()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a commit whose ack never came: %v, want the deadline", err)
	}
	if _, err := st.Commit(ctx, appendBatch(t, "t", 1, 1, "lost")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("the batch again at the version before it: %v, want ErrConflict", err)
	}
	recs, err := st.ReadEvents(ctx, "t", "-1", 100)
	if err != nil || len(recs) != 2 {
		t.Fatalf("%d events, %v: want the first and the lost one", len(recs), err)
	}
}
