package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// Every node follows the whole log with an ordered consumer, from where
// the stream ended when it opened: that is how the batches every node
// commits reach this node's notify function, in the stream's order, and
// how its cache of thread states follows the other nodes' commits.

// heartbeat is the idle heartbeat of the ordered consumers' pulls. On a
// cluster, a new ordered consumer's first pull is now and then lost (a few
// times in a hundred here): nothing arrives until the client misses two
// heartbeats and recreates the consumer. The smallest heartbeat nats.go
// allows keeps that stall near a second instead of ten.
const heartbeat = 500 * time.Millisecond

func (s *Store) startNotify(ctx context.Context, last uint64) error {
	it, err := s.follow(ctx, last)
	if err != nil {
		return err
	}
	s.notifyMu.Lock()
	s.notifyIter = it
	s.notifyMu.Unlock()
	s.delivered.Store(last)
	return nil
}

// follow starts an ordered consumer of the log after stream sequence last.
//
// The consumer recreates itself once when it misses heartbeats (a server
// went away): MaxResetAttempts is 1, because nats.go's own retries back
// off up to ten seconds between tries of ten seconds each, which after a
// lost quorum kept a node deaf to the log for half a minute once the
// quorum was back. When that one try fails, dispatch starts a new
// consumer, tried again at once and then every second (restartNotify).
func (s *Store) follow(ctx context.Context, last uint64) (jetstream.MessagesContext, error) {
	cons, err := s.logStream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy:    jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:      last + 1,
		MaxResetAttempts: 1,
	})
	if err != nil {
		return nil, err
	}
	return cons.Messages(jetstream.PullMaxMessages(1024), jetstream.PullExpiry(5*time.Second), jetstream.PullHeartbeat(heartbeat))
}

// notifyIterator returns the current iterator of the log.
func (s *Store) notifyIterator() jetstream.MessagesContext {
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	return s.notifyIter
}

// stopNotify stops following the log (at Close).
func (s *Store) stopNotify() {
	if it := s.notifyIterator(); it != nil {
		it.Stop()
	}
}

// stopping reports whether Close has started.
func (s *Store) stopping() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// dispatch handles the log's messages one by one, until Close.
func (s *Store) dispatch() {
	defer close(s.dispatchDone)
	for {
		msg, err := s.notifyIterator().Next()
		if err != nil {
			if s.stopping() {
				return
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				// The consumer gave up recreating itself.
				s.restartNotify()
				continue
			}
			// Missed heartbeats and the like: the ordered consumer
			// recreates itself where it was (once; then the iterator
			// is closed, above).
			s.log.Debug("natsstore: notify consumer", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		md, err := msg.Metadata()
		if err != nil {
			s.log.Error("natsstore: notify consumer", "err", err)
			continue
		}
		if hold := s.holdDelivery.Load(); hold != nil {
			<-*hold
		}
		s.handle(md.Sequence.Stream, msg)
	}
}

// restartNotify follows the log again after the last message handled,
// trying until it succeeds or the store closes: while it fails (no server,
// no quorum) this node hears of no commit, its own included, whose callers
// wait (see awaitDelivery).
func (s *Store) restartNotify() {
	wait := 100 * time.Millisecond
	since := time.Now()
	warned := false
	s.feed.update(func() { s.feed.consumer = true })
	defer func() {
		if !s.stopping() {
			s.feed.update(func() { s.feed.consumer = false })
		}
	}()
	for {
		if s.stopping() {
			return
		}
		after := s.delivered.Load()
		ctx, cancel := context.WithTimeout(s.stopCtx, s.opts.Timeout)
		it, err := s.follow(ctx, after)
		cancel()
		if err == nil {
			s.notifyMu.Lock()
			if s.stopping() {
				s.notifyMu.Unlock()
				it.Stop()
				return
			}
			s.notifyIter = it
			s.notifyMu.Unlock()
			if warned {
				s.log.Info("natsstore: following the log again", "after_seq", after, "down_for", time.Since(since).Round(time.Millisecond))
			}
			return
		}
		if !warned && time.Since(since) > s.opts.Timeout {
			warned = true
			s.log.Warn("natsstore: cannot follow the log; retrying", "after_seq", after, "err", err)
		}
		select {
		case <-s.stop:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// handle reports one log message to the notify function and folds it into
// the cached state of its thread.
func (s *Store) handle(seq uint64, msg jetstream.Msg) {
	pc := s.takePending(msg.Headers().Get(jetstream.MsgIDHeader))
	defer func() {
		if pc != nil {
			close(pc.delivered)
		}
		s.delivered.Store(seq)
	}()
	m, err := parseLogMsg(seq, msg.Data(), msg.Headers())
	if err != nil {
		s.log.Error("natsstore: notify consumer: skip a message", "seq", seq, "err", err)
		return
	}
	if e := s.cached(m.h.ID); e != nil {
		e.mu.Lock()
		if v := e.view; v != nil && v.seq < seq && (v.fold(m, s.epoch) != nil || v.tooBig()) {
			e.view = nil
		}
		e.mu.Unlock()
	}
	fn := s.notify.Load()
	if m.h.Delete {
		// This node's own deletions were handled where they were made.
		if _, own := s.ownDeletes.LoadAndDelete(m.msgID); !own && fn != nil {
			(*fn)(&store.Committed{ThreadID: m.h.ID, Before: m.h.Before, Deleted: true})
		}
		return
	}
	if m.n == 0 || fn == nil {
		return
	}
	var c *store.Committed
	if pc != nil {
		c = pc.build(seq, s.epoch)
	}
	if c == nil {
		if c, err = s.decodeCommitted(m); err != nil {
			s.log.Error("natsstore: notify consumer: skip a message", "seq", seq, "err", err)
			return
		}
	}
	(*fn)(c)
}

// decodeCommitted decodes a batch another node (or an abandoned commit)
// published.
func (s *Store) decodeCommitted(m *logMsg) (*store.Committed, error) {
	evs, err := decodeEvents(m.rest)
	if err != nil {
		return nil, err
	}
	offs := offsets(s.epoch, m.seq, len(evs))
	c := &store.Committed{ThreadID: m.h.ID, Before: m.h.Before,
		Records: make([]*tether.Record, len(evs)), Events: make([]*tether.Event, len(evs))}
	for i, w := range evs {
		data := tether.WithOffset(w.Data, offs[i])
		ev := new(tether.Event)
		if err := json.Unmarshal(data, ev); err != nil {
			return nil, err
		}
		c.Events[i] = ev
		c.Records[i] = &tether.Record{Offset: offs[i], Type: w.Type, RunID: w.RunID, MessageID: w.MessageID, Data: data}
	}
	return c, nil
}
