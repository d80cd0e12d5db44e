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
	cons, err := s.logStream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   last + 1,
	})
	if err != nil {
		return err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1024), jetstream.PullExpiry(5*time.Second), jetstream.PullHeartbeat(heartbeat))
	if err != nil {
		return err
	}
	s.notifyIter = it
	s.delivered.Store(last)
	return nil
}

// dispatch handles the log's messages one by one, until Close.
func (s *Store) dispatch() {
	defer close(s.dispatchDone)
	for {
		msg, err := s.notifyIter.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return
		}
		if err != nil {
			// Missed heartbeats and the like: the ordered consumer
			// recreates itself where it was.
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
