package natsstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// ReadEvents implements store.Store. It finds the thread's incarnation and
// last message on the stream's leader, then reads the messages from the
// cursor's one by sequence, subject filtered (by index, not by scanning),
// many per request; a cursor must name an event of a message of this
// incarnation of the thread, in this store's epoch. A limit of zero or less
// returns no records after those checks.
func (s *Store) ReadEvents(ctx context.Context, threadID string, after tether.Offset, limit int) ([]*tether.Record, error) {
	recs, _, err := s.ReadPage(ctx, threadID, after, limit, 0)
	return recs, err
}

// ReadPage implements store.Store, as ReadEvents does. It asks for messages
// up to maxBytes of data at a time, so what it holds past the page is at
// most one message.
func (s *Store) ReadPage(ctx context.Context, threadID string, after tether.Offset, limit, maxBytes int) ([]*tether.Record, bool, error) {
	if s.isClosed() {
		return nil, false, store.ErrClosed
	}
	var (
		exists    bool
		inc, last uint64
	)
	err := s.withView(ctx, threadID, func(v *threadView) error {
		exists, inc, last = v.exists, v.inc, v.seq
		return nil
	})
	if err != nil {
		return nil, false, s.readErr("read events", err)
	}
	if !exists {
		return nil, false, store.ErrNotFound
	}
	recs, _, more, err := s.readEvents(ctx, threadID, inc, last, after, limit, maxBytes)
	return recs, more, err
}

// readEvents reads up to limit records, and up to maxBytes bytes past the
// first (none: no byte limit), of the incarnation inc of a thread's log,
// whose last message is last, after the offset after. complete says whether
// the read reached a limit or the message last: a read cut short by a purge
// (the thread was deleted meanwhile) is not. more says it stopped at a
// limit, so records may follow.
func (s *Store) readEvents(ctx context.Context, threadID string, inc, last uint64, after tether.Offset, limit, maxBytes int) (recs []*tether.Record, complete, more bool, err error) {
	from, skip, cursor := inc, 0, false
	var cseq uint64
	switch after {
	case tether.OffsetStart, "":
		if limit <= 0 {
			return nil, true, true, nil
		}
	default:
		epoch, seq, err := tether.ParseOffset(after)
		if err != nil || epoch != s.epoch {
			return nil, false, false, store.ErrOffsetNotFound
		}
		cseq, skip = seq/eventsPerMsg, int(seq%eventsPerMsg)+1
		if cseq == 0 || cseq < inc || cseq > last {
			return nil, false, false, store.ErrOffsetNotFound
		}
		from, cursor = cseq, true
	}

	subject := s.logSubject(threadID)
	recs = make([]*tether.Record, 0, min(max(limit, 0), 256))
	size := 0
	for from <= last {
		readBytes := 0
		if maxBytes > 0 {
			readBytes = max(maxBytes-size, 1)
		}
		raws, err := s.readLog(ctx, subject, from, last, min(max(limit-len(recs), 0)+1, 1024), readBytes)
		if err != nil {
			return nil, false, false, s.readErr("read events", err)
		}
		if len(raws) == 0 {
			break
		}
		for _, r := range raws {
			m, err := parseRaw(r)
			if err != nil {
				return nil, false, false, s.readErr("read events", err)
			}
			if cursor {
				cursor = false
				if m.seq != cseq || m.h.Delete || skip > m.n {
					return nil, false, false, store.ErrOffsetNotFound
				}
			}
			if m.h.Delete {
				return recs, false, false, nil
			}
			if len(recs) >= limit {
				return recs, true, true, nil
			}
			if m.n > skip {
				evs, err := decodeEvents(m.rest)
				if err != nil {
					return nil, false, false, s.readErr("read events", err)
				}
				offs := offsets(s.epoch, m.seq, len(evs))
				for i := skip; i < len(evs) && len(recs) < limit; i++ {
					w := evs[i]
					rec := &tether.Record{Offset: offs[i], Type: w.Type, RunID: w.RunID,
						MessageID: w.MessageID, Data: tether.WithOffset(w.Data, offs[i])}
					size += rec.Size()
					if maxBytes > 0 && len(recs) > 0 && size > maxBytes {
						return recs, true, true, nil
					}
					recs = append(recs, rec)
				}
			}
			skip = 0
		}
		if len(recs) >= limit {
			return recs, true, true, nil
		}
		from = raws[len(raws)-1].Seq + 1
	}
	if cursor {
		return nil, false, false, store.ErrOffsetNotFound
	}
	// Short of last: purged meanwhile.
	return recs, from > last, false, nil
}

// Thread implements store.Store.
func (s *Store) Thread(ctx context.Context, id string) (*store.ThreadRecord, error) {
	if s.isClosed() {
		return nil, store.ErrClosed
	}
	var tr *store.ThreadRecord
	err := s.withView(ctx, id, func(v *threadView) error {
		if !v.exists {
			return store.ErrNotFound
		}
		tr = &store.ThreadRecord{Thread: v.record(), Version: v.version}
		return nil
	})
	if err != nil {
		return nil, s.readErr("read thread", err)
	}
	return tr, nil
}

// Threads implements store.Store. It reads the rows of every thread of the
// namespace from the bucket (one consumer; O(threads of the namespace) per
// page: the bucket has no index by time), then sorts. The cursor is the (updated_at, id) of the last thread
// of the page, as in sqlitestore.
func (s *Store) Threads(ctx context.Context, q store.ThreadQuery) (*store.ThreadPage, error) {
	if s.isClosed() {
		return nil, store.ErrClosed
	}
	limit := q.PageLimit()
	var (
		cu  int64
		cid string
	)
	if q.Cursor != "" {
		var ok bool
		if cu, cid, ok = store.DecodeThreadCursor(q.Cursor); !ok {
			return nil, tether.Errorf(tether.CodeBadRequest, "thread cursor is malformed")
		}
	}
	rows, err := s.scan(ctx, "t."+queryNamespaceToken(q.Namespace)+".*")
	if err != nil {
		return nil, s.readErr("list threads", err)
	}
	var ths []*threadRow
	for key, val := range rows {
		row := new(threadRow)
		if err := json.Unmarshal(val, row); err != nil {
			return nil, s.readErr("list threads", fmt.Errorf("row %s: %w", key, err))
		}
		t := row.Thread
		if q.Status != "" && t.Status != string(q.Status) || !q.Visible.Allows(t.Owner, t.ID) {
			continue
		}
		if q.Cursor != "" && (t.UpdatedAt > cu || t.UpdatedAt == cu && t.ID >= cid) {
			continue
		}
		ths = append(ths, row)
	}
	slices.SortFunc(ths, func(a, b *threadRow) int {
		if a.Thread.UpdatedAt != b.Thread.UpdatedAt {
			if a.Thread.UpdatedAt > b.Thread.UpdatedAt {
				return -1
			}
			return 1
		}
		return strings.Compare(b.Thread.ID, a.Thread.ID)
	})
	page := &store.ThreadPage{Threads: make([]tether.Thread, 0, min(limit, len(ths)))}
	for _, row := range ths[:min(limit, len(ths))] {
		page.Threads = append(page.Threads, row.Thread.thread(row.Last))
	}
	if len(ths) > limit {
		last := page.Threads[limit-1]
		page.Next = store.EncodeThreadCursor(last.UpdatedAt.UnixMilli(), last.ID)
	}
	return page, nil
}
