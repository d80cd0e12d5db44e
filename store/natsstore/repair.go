package natsstore

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The repairer makes sure that every batch in the log has its rows in the
// bucket, also when the node that committed it died between the publish
// and the bucket writes, and that every deletion finished. All nodes pull
// from one durable consumer of the log, so each message is checked once,
// by one of them, and a restarted cluster goes on where it stopped. A
// message is checked once it is RepairDelay old, so that its committer has
// had the time to write its rows itself (then the check costs at most one
// read: a node that wrote the thread's row last knows its revision).

// repairConsumer names the durable consumer of the repairer.
const repairConsumer = "tether_repair"

func (s *Store) startRepair(ctx context.Context) error {
	cons, err := s.logStream.Consumer(ctx, repairConsumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		cons, err = s.logStream.CreateConsumer(ctx, jetstream.ConsumerConfig{
			Durable:       repairConsumer,
			Description:   "Tether: writes the metadata of batches whose committer died before it did",
			DeliverPolicy: jetstream.DeliverAllPolicy,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       time.Minute,
			MaxAckPending: 4096,
		})
		if errors.Is(err, jetstream.ErrConsumerExists) {
			cons, err = s.logStream.Consumer(ctx, repairConsumer)
		}
	}
	if err != nil {
		return err
	}
	// Few at a time: a node holds the messages it pulled until it dies
	// (then they come back after AckWait) or closes (then it hands them
	// back). Short pulls with the notify consumer's heartbeat: with the
	// defaults (30 s pulls, 15 s heartbeats) a first pull lost on a
	// cluster (see heartbeat) left the repairer idle for half a minute.
	it, err := cons.Messages(jetstream.PullMaxMessages(64), jetstream.PullExpiry(5*time.Second), jetstream.PullHeartbeat(heartbeat))
	if err != nil {
		return err
	}
	s.repairMu.Lock()
	defer s.repairMu.Unlock()
	if s.stopping() {
		it.Stop()
		return nil
	}
	s.repairIter = it
	return nil
}

// repairIterator returns the current iterator of the repair consumer.
func (s *Store) repairIterator() jetstream.MessagesContext {
	s.repairMu.Lock()
	defer s.repairMu.Unlock()
	return s.repairIter
}

// restartRepair pulls from the repair consumer again, creating it if it is
// gone (deleted by hand, or lost with its server's state), trying until it
// succeeds or the store closes: without it this node would repair nothing
// until it restarts.
func (s *Store) restartRepair() {
	wait := 100 * time.Millisecond
	for !s.stopping() {
		ctx, cancel := context.WithTimeout(s.stopCtx, s.opts.Timeout)
		err := s.startRepair(ctx)
		cancel()
		if err == nil {
			s.log.Info("natsstore: pulling from the repair consumer again")
			return
		}
		s.log.Warn("natsstore: cannot pull from the repair consumer; retrying", "err", err)
		select {
		case <-s.stop:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

func (s *Store) repairLoop() {
	defer close(s.repairDone)
	for {
		it := s.repairIterator()
		msg, err := it.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			if s.stopping() {
				return
			}
			// The consumer is gone (nats.go closes the iterator).
			s.restartRepair()
			continue
		}
		if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) {
			it.Stop()
			if s.stopping() {
				return
			}
			s.restartRepair()
			continue
		}
		if err != nil {
			s.log.Debug("natsstore: repair consumer", "err", err)
			select {
			case <-s.stop:
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		md, err := msg.Metadata()
		if err != nil {
			s.log.Error("natsstore: repair consumer", "err", err)
			continue
		}
		if wait := time.Until(md.Timestamp.Add(s.opts.RepairDelay)); wait > 0 {
			select {
			case <-s.stop:
			case <-time.After(wait):
			}
		}
		if s.stopCtx.Err() != nil {
			// Closing: hand the message back, for another node now.
			_ = msg.Nak()
			continue
		}
		if err := s.repair(md.Sequence.Stream, msg); err != nil {
			if s.stopCtx.Err() != nil {
				_ = msg.Nak()
				continue
			}
			s.log.Warn("natsstore: repair", "seq", md.Sequence.Stream, "err", err)
			_ = msg.NakWithDelay(5 * time.Second)
			continue
		}
		_ = msg.Ack()
	}
}

// repair checks one log message.
func (s *Store) repair(seq uint64, msg jetstream.Msg) error {
	m, err := parseLogMsg(seq, msg.Data(), msg.Headers())
	if err != nil {
		s.log.Error("natsstore: repair: skip a message", "seq", seq, "err", err)
		return nil
	}
	ctx, cancel := context.WithTimeout(s.stopCtx, 3*s.opts.Timeout)
	defer cancel()
	if m.h.Delete {
		return s.finishDelete(ctx, m.h.ID, m)
	}
	return s.apply(ctx, m.h.ID, m)
}
