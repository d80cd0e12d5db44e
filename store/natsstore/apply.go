package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	tether "github.com/tetherhq/tether"
)

// apply brings the bucket's rows of a thread up to the log message m: it
// writes the rows of m (and of any earlier message of the thread the bucket
// misses), each row before the thread's row, which it moves forward last,
// from the row of exactly the message before (compare-and-set). So the
// thread's row in the bucket is a watermark: when it says seq, every row of
// every message of the thread up to seq is in the bucket. Readers rely on
// that to fold only the log after it.
//
// apply is idempotent and safe to race with other appliers of the same or
// other messages of the thread: each node's committer, the repairer.
func (s *Store) apply(ctx context.Context, id string, m *logMsg) error {
	key := threadKey(id)
	for attempt := 0; attempt < 20; attempt++ {
		var (
			cur []byte
			rev uint64
			err error
		)
		if h, ok := s.hint(key); ok && attempt == 0 {
			cur, rev = h.val, h.rev
		} else if cur, rev, err = s.kvGet(ctx, key); err != nil {
			return err
		}
		var row *threadRow
		if cur != nil {
			row = new(threadRow)
			if err := json.Unmarshal(cur, row); err != nil {
				return fmt.Errorf("row of thread %s: %w", id, err)
			}
		}
		at := uint64(0)
		if row != nil {
			at = row.Seq
		}
		if at >= m.seq {
			return nil
		}
		chain := []*logMsg{m}
		if !m.h.Create && (row == nil || row.Del || row.Seq != m.h.Prev) {
			// The bucket misses earlier messages of the thread: apply them
			// first, from the log.
			raws, err := s.readLog(ctx, s.logSubject(id), at+1, m.seq-1, math.MaxInt, 0)
			if err != nil {
				return err
			}
			if len(raws) == 0 || raws[len(raws)-1].Seq != m.h.Prev {
				// Purged: the thread was deleted after m, and its deletion
				// cleans up after it.
				return nil
			}
			chain = chain[:0]
			for _, r := range raws {
				lm, err := parseRaw(r)
				if err != nil {
					return err
				}
				chain = append(chain, lm)
			}
			chain = append(chain, m)
		}
		moved := true
		for _, c := range chain {
			next, err := s.nextRow(row, c)
			if err != nil {
				return fmt.Errorf("thread %s: %w", id, err)
			}
			if err := s.writeRows(ctx, id, c); err != nil {
				return err
			}
			val, err := json.Marshal(next)
			if err != nil {
				return err
			}
			var ttl time.Duration
			if next.Del {
				ttl = s.opts.TombstoneTTL
			}
			newRev, err := s.kvPut(ctx, key, val, rev, ttl)
			if errors.Is(err, errCAS) {
				moved = false // someone else moved it: look again
				break
			}
			if err != nil {
				return err
			}
			row, rev = next, newRev
		}
		if moved {
			return nil
		}
	}
	return fmt.Errorf("thread %s: the row keeps moving", id)
}

// nextRow returns a thread's row after the log message m.
func (s *Store) nextRow(row *threadRow, m *logMsg) (*threadRow, error) {
	switch {
	case m.h.Delete:
		return &threadRow{rowMeta: rowMeta{Seq: m.seq, Del: true}}, nil
	case m.h.Create:
		if m.h.Thread == nil {
			return nil, errors.New("create without a thread row")
		}
		row = &threadRow{rowMeta: rowMeta{Seq: m.seq, Inc: m.seq}, Last: tether.OffsetStart, Thread: *m.h.Thread}
	case row == nil || row.Del || row.Seq != m.h.Prev:
		return nil, errGap
	default:
		r := *row
		row = &r
		row.Seq = m.seq
		if m.h.Thread != nil {
			row.Thread = *m.h.Thread
		}
	}
	row.Version += int64(m.n)
	if m.n > 0 {
		row.Last = offsetOf(s.epoch, m.seq, m.n-1)
	}
	return row, nil
}

// writeRows writes the rows of the runs and producers of the log message m,
// concurrently.
func (s *Store) writeRows(ctx context.Context, id string, m *logMsg) error {
	h := m.h
	if h.Delete || (len(h.Runs) == 0 && len(h.Producers) == 0) {
		return nil
	}
	inc := h.Inc
	if h.Create {
		inc = m.seq
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	do := func(key string, build func(cur []byte) ([]byte, time.Duration, error)) {
		wg.Go(func() {
			if err := s.putNewer(ctx, key, m.seq, build); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	for j, r := range h.Runs {
		// The run's row keeps the place of its first write.
		runRowOf := func(cur []byte) (*runRow, error) {
			rr := &runRow{rowMeta: rowMeta{Seq: m.seq, Inc: inc}, Thread: id, First: m.seq*eventsPerMsg + uint64(j), Run: r}
			if cur != nil {
				var old runRow
				if err := json.Unmarshal(cur, &old); err != nil {
					return nil, err
				}
				if !old.Del && old.Thread == id && old.Inc == inc && old.First != 0 {
					rr.First = old.First
				}
			}
			return rr, nil
		}
		do(runKey(r.id), func(cur []byte) ([]byte, time.Duration, error) {
			rr, err := runRowOf(cur)
			if err != nil {
				return nil, 0, err
			}
			b, err := json.Marshal(rr)
			return b, 0, err
		})
		do(activeKey(r.id), func(cur []byte) ([]byte, time.Duration, error) {
			if r.terminal {
				return s.tombstone(m.seq)
			}
			rr, err := runRowOf(cur)
			if err != nil {
				return nil, 0, err
			}
			b, err := json.Marshal(rr)
			return b, 0, err
		})
		do(runIndexKey(id, r.id), func(cur []byte) ([]byte, time.Duration, error) {
			if sameInc(cur, inc) {
				return nil, 0, nil
			}
			b, err := json.Marshal(rowMeta{Seq: m.seq, Inc: inc})
			return b, 0, err
		})
		if r.Key != "" {
			do(idemKey(id, r.Key), func(cur []byte) ([]byte, time.Duration, error) {
				if cur != nil {
					var old keyRow
					if err := json.Unmarshal(cur, &old); err == nil && !old.Del && old.Inc == inc && old.Run == r.id {
						return nil, 0, nil
					}
				}
				b, err := json.Marshal(keyRow{rowMeta: rowMeta{Seq: m.seq, Inc: inc}, Run: r.id})
				return b, 0, err
			})
		}
	}
	// A producer may be in a message more than once (appends of one
	// producer gathered in one commit). The rows are written at once, in
	// no order, so only its last state may be.
	last := make(map[string]int, len(h.Producers))
	for i, p := range h.Producers {
		last[p.Key] = i
	}
	for i, p := range h.Producers {
		if last[p.Key] != i {
			continue
		}
		do(producerKey(id, p.Key), func([]byte) ([]byte, time.Duration, error) {
			b, err := json.Marshal(producerRow{rowMeta: rowMeta{Seq: m.seq, Inc: inc}, Epoch: p.Epoch, PSeq: p.Seq})
			return b, 0, err
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func sameInc(cur []byte, inc uint64) bool {
	if cur == nil {
		return false
	}
	var m rowMeta
	return json.Unmarshal(cur, &m) == nil && !m.Del && m.Inc == inc
}
