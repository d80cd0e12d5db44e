package sqlitestore

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// threadState is what the writer needs of a thread to check a batch. The
// writer keeps the states it has seen in memory, so that a batch costs no
// read: the writer is the only one that changes them (Open takes a lock
// that keeps other processes out of the file).
type threadState struct {
	pk      int64
	version int64
	last    string // last offset, or OffsetStart
	// row is the thread row as last written in full, to tell whether the
	// next batch changes more than its log position.
	row rowState
	// producer is the state of the producer the thread row holds
	// (threadProducerColumns); Key is "" when it holds none.
	producer store.Producer
}

// nextProducer returns the producer state the thread row holds after a
// batch that moves producers (the last of them), and the states the
// batch must write to the producers table instead: each one that another
// takes the row's place from. Most batches move only the row's own
// producer and write no other row.
func nextProducer(cur store.Producer, producers []store.Producer) (store.Producer, []store.Producer) {
	var spill []store.Producer
	for _, p := range producers {
		switch {
		case p.Key == "":
			// Not a key the row can tell from "none": never held there.
			spill = append(spill, p)
			continue
		case cur.Key != "" && cur.Key != p.Key:
			spill = append(spill, cur)
		}
		cur = p
	}
	return cur, spill
}

// rowState is what a full write of a thread row sets.
type rowState struct {
	known            bool
	status, active   string
	metadata         []byte
	created, updated int64 // Unix milliseconds
}

// updatedLag is how far a thread row's updated_at may trail its last
// batch. Rewriting it on every batch rewrites both of its indexes, which is
// most of what a busy thread's small appends cost the writer.
const updatedLag = 1000 // ms

// sameRow reports whether the row t would write differs from the last
// full write only by an updated_at less than updatedLag newer.
func (r *rowState) sameRow(t *tether.Thread) bool {
	return r.known && r.status == string(t.Status) && r.active == t.ActiveRunID &&
		r.created == millis(t.CreatedAt) && bytes.Equal(r.metadata, t.Metadata) &&
		millis(t.UpdatedAt)-r.updated < updatedLag
}

func (r *rowState) set(t *tether.Thread) {
	*r = rowState{known: true, status: string(t.Status), active: t.ActiveRunID,
		metadata: bytes.Clone(t.Metadata), created: millis(t.CreatedAt), updated: millis(t.UpdatedAt)}
}

// maxCachedThreads bounds the writer's cache; past it the cache starts
// over, which costs one read per thread written next.
const maxCachedThreads = 1 << 16

// thread returns the state of a thread, or nil if it does not exist.
func (s *Store) thread(id string) (*threadState, error) {
	if st := s.threads[id]; st != nil {
		return st, nil
	}
	st := new(threadState)
	p := &st.producer
	err := s.w.threadState.QueryRow(id).Scan(&st.pk, &st.version, &st.last, &p.Key, &p.Epoch, &p.Seq)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read thread: %w", err)
	}
	s.cacheThread(id, st)
	return st, nil
}

func (s *Store) cacheThread(id string, st *threadState) {
	if len(s.threads) >= maxCachedThreads {
		clear(s.threads)
	}
	s.threads[id] = st
}
