package sqlitestore

import (
	"database/sql"
	"errors"
	"fmt"
)

// threadState is what the writer needs of a thread to check a batch. The
// writer keeps the states it has seen in memory, so that a batch costs no
// read: the writer is the only one that changes them (Open takes a lock
// that keeps other processes out of the file).
type threadState struct {
	pk      int64
	version int64
	last    string // last offset, or OffsetStart
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
	err := s.w.threadState.QueryRow(id).Scan(&st.pk, &st.version, &st.last)
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
