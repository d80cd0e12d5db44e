package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// DeleteThread implements store.Store. The deletion is a tombstone message
// on the thread's subject, published like a batch (so it is ordered with
// the thread's commits, and a commit racing it fails); then the rows of the
// thread are deleted and its log purged up to the tombstone.
//
// The tombstone itself stays in the log for Options.TombstoneTTL: a node whose
// consumer of the log resumes after the purge (it was cut off from NATS,
// or its consumer was recreated after missed heartbeats) gets the log from
// where it stopped minus what was purged, and the tombstone is how it hears
// that the thread it holds (in its cache, its subscriptions, its run
// queue) is gone. Purged with it, the deletion went unnoticed there: the
// node served the deleted thread and its streams of it stayed open.
func (s *Store) DeleteThread(ctx context.Context, id string) error {
	if err := s.begin(); err != nil {
		return err
	}
	defer s.inflight.Done()
	e := s.acquire(id)
	defer s.release(e)
	select {
	case e.lock <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	locked := true
	unlock := func() {
		if locked {
			<-e.lock
			locked = false
		}
	}
	defer unlock()

	subject := s.logSubject(id)
	var m *logMsg
	fresh := false
	for attempt := 0; ; attempt++ {
		st, err := s.commitState(ctx, e, fresh)
		if err != nil {
			return s.readErr("delete thread", err)
		}
		if !st.exists {
			if !fresh {
				fresh = true
				continue
			}
			return store.ErrNotFound
		}
		h := &header{ID: id, Delete: true, Prev: st.seq, Inc: st.inc, Version: st.version, Before: st.last}
		body, err := encodeBody(h, nil)
		if err != nil {
			return err
		}
		msgID := nuid.Next()
		s.ownDeletes.Store(msgID, struct{}{})
		ack, err := s.publish(context.Background(), subject, body, int64(st.seq), msgID, s.opts.TombstoneTTL)
		var seq uint64
		if err == nil {
			seq = ack.Sequence
		} else if !errors.Is(err, errCAS) && !definite(err) {
			if seq, err = s.resolve(subject, st.seq, msgID, body); err == nil && seq == 0 {
				err = errCAS
			}
		}
		if err != nil {
			s.ownDeletes.Delete(msgID)
			s.forget(e)
			if errors.Is(err, errCAS) && attempt < maxAttempts {
				fresh = true
				continue
			}
			return fmt.Errorf("natsstore: delete thread %s: %w", id, err)
		}
		m = &logMsg{seq: seq, h: h, msgID: msgID}
		break
	}
	e.mu.Lock()
	e.view = &threadView{seq: m.seq, last: tether.OffsetStart}
	prev := e.applied
	done := make(chan struct{})
	e.applied = done
	e.mu.Unlock()
	unlock()

	actx, cancel := context.WithTimeout(context.Background(), 3*s.opts.Timeout)
	defer cancel()
	if prev != nil {
		<-prev
	}
	defer close(done)
	if s.dieAfterPublish.Load() {
		return nil
	}
	if err := s.finishDelete(actx, id, m); err != nil {
		s.log.Warn("natsstore: clean up after a deleted thread (the repairer will finish)", "thread", id, "err", err)
	}
	return nil
}

// finishDelete writes the tombstone of a deleted thread's row, deletes its
// other rows and purges its log.
func (s *Store) finishDelete(ctx context.Context, id string, m *logMsg) error {
	if err := s.apply(ctx, id, m); err != nil {
		return err
	}
	if err := s.cleanup(ctx, id, m.seq); err != nil {
		return err
	}
	if e := s.cached(id); e != nil {
		e.mu.Lock()
		if e.view != nil && e.view.seq == m.seq {
			e.view = &threadView{seq: m.seq, last: tether.OffsetStart} // the log holds the tombstone only
		}
		e.mu.Unlock()
	}
	return nil
}

// cleanup deletes the rows of a thread whose incarnations ended with the
// tombstone message del, then purges the thread's log up to it (the
// tombstone stays, until it expires or the next deletion). Readers
// never see these rows (they check a row's incarnation against the log),
// so this only frees space, and a crash in the middle leaves the
// tombstone in the log for the repairer to finish the job.
func (s *Store) cleanup(ctx context.Context, id string, del uint64) error {
	t := token(id)
	rows, err := s.scan(ctx, "x."+t+".>", "k."+t+".>", "p."+t+".>", "c."+t)
	if err != nil {
		return err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	kill := func(key string, ours func(cur []byte) bool) {
		wg.Go(func() {
			err := s.putNewer(ctx, key, del, func(cur []byte) ([]byte, time.Duration, error) {
				if cur == nil || (ours != nil && !ours(cur)) {
					return nil, 0, nil
				}
				return s.tombstone(del)
			})
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	ofThread := func(cur []byte) bool {
		var r runRow
		return json.Unmarshal(cur, &r) == nil && r.Thread == id
	}
	for key := range rows {
		if len(key) > 2 && key[:2] == "x." {
			run, err := tokenEncoding.DecodeString(key[len("x."+t+"."):])
			if err == nil {
				kill(runKey(string(run)), ofThread)
				kill(activeKey(string(run)), ofThread)
			}
		}
		kill(key, nil)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return s.retry(ctx, func(ctx context.Context) error {
		return s.logStream.Purge(ctx, jetstream.WithPurgeSubject(s.logSubject(id)), jetstream.WithPurgeSequence(del))
	})
}
