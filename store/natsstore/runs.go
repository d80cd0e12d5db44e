package natsstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/tetherhq/tether/store"
)

// Run implements store.Store: the run's row, unless the log of its thread
// changed the run after the bucket's row of the thread.
func (s *Store) Run(ctx context.Context, id string) (*store.RunRecord, error) {
	if s.isClosed() {
		return nil, store.ErrClosed
	}
	row, err := s.runRow(ctx, id)
	if err != nil {
		return nil, s.readErr("read run", err)
	}
	if row == nil {
		return nil, store.ErrNotFound
	}
	var w *wireRun
	err = s.withView(ctx, row.Thread, func(v *threadView) error {
		switch tr := v.runs[id]; {
		case !v.exists:
			return store.ErrNotFound
		case tr != nil:
			w = tr.w
		case row.Inc != v.inc:
			return store.ErrNotFound // of a deleted incarnation of the thread
		default:
			w = row.Run
		}
		return nil
	})
	if err != nil {
		return nil, s.readErr("read run", err)
	}
	return s.record(w)
}

func (s *Store) record(w *wireRun) (*store.RunRecord, error) {
	if w == nil {
		return nil, store.ErrNotFound
	}
	rr, err := w.record()
	if err != nil {
		return nil, s.readErr("read run", err)
	}
	return rr, nil
}

// runRow reads a run's row, nil if there is none.
func (s *Store) runRow(ctx context.Context, id string) (*runRow, error) {
	val, _, err := s.kvGet(ctx, runKey(id))
	if err != nil || val == nil {
		return nil, err
	}
	row := new(runRow)
	if err := json.Unmarshal(val, row); err != nil {
		return nil, fmt.Errorf("row of run %s: %w", id, err)
	}
	if row.Del || row.Run == nil {
		return nil, nil
	}
	if err := row.Run.init(); err != nil {
		return nil, err
	}
	return row, nil
}

// keyRow reads the row of an idempotency key, nil if there is none.
func (s *Store) keyRow(ctx context.Context, threadID, key string) (*keyRow, error) {
	val, _, err := s.kvGet(ctx, idemKey(threadID, key))
	if err != nil || val == nil {
		return nil, err
	}
	kr := new(keyRow)
	if err := json.Unmarshal(val, kr); err != nil {
		return nil, fmt.Errorf("row of key %s: %w", key, err)
	}
	if kr.Del {
		return nil, nil
	}
	return kr, nil
}

// RunByKey implements store.Store.
func (s *Store) RunByKey(ctx context.Context, threadID, key string) (*store.RunRecord, error) {
	if s.isClosed() {
		return nil, store.ErrClosed
	}
	if key == "" {
		return nil, store.ErrNotFound
	}
	var (
		inc   uint64
		owner string
		known bool
		tail  map[string]*tailRun
	)
	err := s.withView(ctx, threadID, func(v *threadView) error {
		if !v.exists {
			return store.ErrNotFound
		}
		inc = v.inc
		owner, known = v.keys[key]
		tail = make(map[string]*tailRun, len(v.runs))
		for id, tr := range v.runs {
			tail[id] = tr
		}
		return nil
	})
	if err != nil {
		return nil, s.readErr("read run", err)
	}
	if !known {
		kr, err := s.keyRow(ctx, threadID, key)
		if err != nil {
			return nil, s.readErr("read run", err)
		}
		if kr != nil && kr.Inc == inc {
			owner = kr.Run
		}
	}
	if owner == "" {
		return nil, store.ErrNotFound
	}
	w, err := s.runOf(ctx, threadID, inc, tail, owner)
	if err != nil {
		return nil, err
	}
	if w == nil || w.Key != key {
		return nil, store.ErrNotFound
	}
	return s.record(w)
}

// ThreadRun implements store.ThreadRunReader: the run of a thread as of
// the thread's log, exact even while its row in the bucket trails the log
// (the committing node writes it after the publish, or the repairer does).
func (s *Store) ThreadRun(ctx context.Context, threadID, id string) (*store.RunRecord, error) {
	if s.isClosed() {
		return nil, store.ErrClosed
	}
	var (
		inc  uint64
		tail map[string]*tailRun
	)
	err := s.withView(ctx, threadID, func(v *threadView) error {
		if !v.exists {
			return store.ErrNotFound
		}
		inc = v.inc
		if tr := v.runs[id]; tr != nil {
			tail = map[string]*tailRun{id: tr}
		}
		return nil
	})
	if err != nil {
		return nil, s.readErr("read run", err)
	}
	w, err := s.runOf(ctx, threadID, inc, tail, id)
	if err != nil {
		return nil, err
	}
	return s.record(w)
}

// runOf returns run id of a thread's incarnation inc: from the log
// messages after the thread's row (tail), else from the run's row. nil
// means none.
func (s *Store) runOf(ctx context.Context, threadID string, inc uint64, tail map[string]*tailRun, id string) (*wireRun, error) {
	if tr := tail[id]; tr != nil {
		return tr.w, nil
	}
	row, err := s.runRow(ctx, id)
	if err != nil {
		return nil, s.readErr("read run", err)
	}
	if row != nil && row.Thread == threadID && row.Inc == inc {
		return row.Run, nil
	}
	return nil, nil
}

// ActiveRuns implements store.Store. It reads the bucket's index of active
// runs (one consumer), then checks each run's thread (one request per
// thread to its log's leader, a few concurrently): a run of a deleted
// incarnation is left out, a run the log changed after the bucket's row is
// taken from the log.
func (s *Store) ActiveRuns(ctx context.Context) ([]*store.RunRecord, error) {
	if s.isClosed() {
		return nil, store.ErrClosed
	}
	rows, err := s.scan(ctx, "a.>")
	if err != nil {
		return nil, s.readErr("read runs", err)
	}
	byThread := map[string][]*runRow{}
	for key, val := range rows {
		row := new(runRow)
		if err := json.Unmarshal(val, row); err != nil {
			return nil, s.readErr("read runs", fmt.Errorf("row %s: %w", key, err))
		}
		if row.Run == nil {
			continue
		}
		if err := row.Run.init(); err != nil {
			return nil, s.readErr("read runs", err)
		}
		byThread[row.Thread] = append(byThread[row.Thread], row)
	}
	type active struct {
		first uint64
		w     *wireRun
	}
	var (
		mu   sync.Mutex
		out  []active
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 16)
	)
	for thread, trows := range byThread {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var found []active
			err := s.withView(ctx, thread, func(v *threadView) error {
				if !v.exists {
					return nil
				}
				seen := map[string]bool{}
				for _, row := range trows {
					id := row.Run.id
					seen[id] = true
					switch tr := v.runs[id]; {
					case tr != nil && !tr.w.terminal:
						found = append(found, active{row.First, tr.w})
					case tr == nil && row.Inc == v.inc:
						found = append(found, active{row.First, row.Run})
					}
				}
				for id, tr := range v.runs {
					if !seen[id] && !tr.w.terminal {
						found = append(found, active{tr.first, tr.w})
					}
				}
				return nil
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil && err != store.ErrNotFound {
				errs = append(errs, err)
			}
			out = append(out, found...)
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, s.readErr("read runs", errs[0])
	}
	slices.SortFunc(out, func(a, b active) int {
		if a.first != b.first {
			if a.first < b.first {
				return -1
			}
			return 1
		}
		return strings.Compare(a.w.id, b.w.id)
	})
	runs := make([]*store.RunRecord, 0, len(out))
	for _, a := range out {
		rr, err := a.w.record()
		if err != nil {
			return nil, s.readErr("read runs", err)
		}
		runs = append(runs, rr)
	}
	return runs, nil
}

// Producer implements store.Store.
func (s *Store) Producer(ctx context.Context, threadID, key string) (*store.Producer, error) {
	if s.isClosed() {
		return nil, store.ErrClosed
	}
	var (
		inc uint64
		p   *store.Producer
	)
	err := s.withView(ctx, threadID, func(v *threadView) error {
		if !v.exists {
			return store.ErrNotFound
		}
		inc = v.inc
		if w, ok := v.prods[key]; ok {
			p = &store.Producer{Key: key, Epoch: w.Epoch, Seq: w.Seq}
		}
		return nil
	})
	if err != nil {
		return nil, s.readErr("read producer", err)
	}
	if p != nil {
		return p, nil
	}
	val, _, err := s.kvGet(ctx, producerKey(threadID, key))
	if err != nil {
		return nil, s.readErr("read producer", err)
	}
	var row producerRow
	if val == nil {
		return nil, store.ErrNotFound
	}
	if err := json.Unmarshal(val, &row); err != nil {
		return nil, s.readErr("read producer", err)
	}
	if row.Del || row.Inc != inc {
		return nil, store.ErrNotFound
	}
	return &store.Producer{Key: key, Epoch: row.Epoch, Seq: row.PSeq}, nil
}
