package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	tether "github.com/tetherhq/tether"
)

// The bucket holds the metadata as a projection of the log, one key per
// row:
//
//	t.<ns>.<thread>        threadRow: the thread's row, version, last offset
//	r.<run>                runRow: a run (with its lease and key)
//	a.<run>                runRow: the same, while the run is not terminal
//	x.<thread>.<run>       rowMeta: the runs of a thread, for DeleteThread
//	k.<thread>.<key>       keyRow: the run that holds an idempotency key
//	p.<thread>.<producer>  producerRow: an idempotent producer's state
//	c.<thread>             checkpointRow
//	f.<node>               a fence (see scan)
//
// Every row says which log message wrote it (seq) and which incarnation of
// its thread it belongs to (inc: the thread's Create message). A row is only
// ever replaced by a row of a later message (compare-and-set on the key's
// revision), so writers of different batches can race in any order; a
// deletion writes a tombstone that expires after Options.TombstoneTTL.

type rowMeta struct {
	Seq uint64 `json:"seq"`
	Inc uint64 `json:"inc,omitempty"`
	Del bool   `json:"del,omitempty"`
}

type threadRow struct {
	rowMeta
	Version int64         `json:"version,omitempty"`
	Last    tether.Offset `json:"last,omitempty"`
	Thread  wireThread    `json:"thread"`
}

type runRow struct {
	rowMeta
	Thread string `json:"thread,omitempty"`
	// First orders the active runs: the position of the run's first write
	// in the log.
	First uint64   `json:"first,omitempty"`
	Run   *wireRun `json:"run,omitempty"`
}

type keyRow struct {
	rowMeta
	Run string `json:"run,omitempty"`
}

type producerRow struct {
	rowMeta
	Epoch int64 `json:"epoch"`
	PSeq  int64 `json:"pseq"`
}

type checkpointRow struct {
	rowMeta
	Offset tether.Offset `json:"offset"`
	Data   []byte        `json:"data"`
}

func threadKey(id string) string { return "t." + namespaceToken(id) + "." + token(id) }

// namespaceToken is the key token of the namespace of a thread ID (see
// store.ThreadQuery): "_" for an ID without ":", else "-" and the token of
// what comes before the first ":". A listing of one namespace reads only
// its keys.
func namespaceToken(id string) string {
	ns, _, ok := strings.Cut(id, ":")
	if !ok {
		return "_"
	}
	return "-" + tokenEncoding.EncodeToString([]byte(ns))
}

func queryNamespaceToken(ns string) string {
	if ns == "" {
		return "_"
	}
	return "-" + tokenEncoding.EncodeToString([]byte(ns))
}
func runKey(id string) string               { return "r." + token(id) }
func activeKey(id string) string            { return "a." + token(id) }
func runIndexKey(thread, run string) string { return "x." + token(thread) + "." + token(run) }
func idemKey(thread, key string) string     { return "k." + token(thread) + "." + token(key) }
func producerKey(thread, key string) string {
	return "p." + token(thread) + "." + token(key)
}
func checkpointKey(id string) string { return "c." + token(id) }

// kvGet reads a key from the bucket's leader. A missing key returns nil
// and the revision to expect when creating it.
func (s *Store) kvGet(ctx context.Context, key string) ([]byte, uint64, error) {
	m, err := s.leaderGet(ctx, s.metaName, msgGetRequest{LastFor: s.kvSubject + key})
	if errors.Is(err, errNoMsg) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	if op := m.Header.Get("KV-Operation"); op != "" {
		return nil, m.Seq, nil // a delete or purge marker
	}
	s.setHint(key, m.Seq, m.Data)
	return m.Data, m.Seq, nil
}

// kvPut writes a key if its revision is still expect (0: absent).
func (s *Store) kvPut(ctx context.Context, key string, val []byte, expect uint64, ttl time.Duration) (uint64, error) {
	ack, err := s.publish(ctx, s.kvSubject+key, val, int64(expect), "", ttl)
	if err != nil {
		s.dropHint(key)
		return 0, err
	}
	s.setHint(key, ack.Sequence, val)
	return ack.Sequence, nil
}

// Hints remember the revision and value of keys this node wrote or read
// last, so that a node that is the only writer of a row replaces it with
// one request. A wrong hint costs a failed compare-and-set and a read.
type kvHint struct {
	rev uint64
	val []byte
}

// Hints are bounded in number and size: a hint costs memory, a missing
// one a read.
const (
	maxHints    = 1 << 14
	maxHintSize = 4 << 10
)

func (s *Store) hint(key string) (kvHint, bool) {
	s.hintsMu.Lock()
	defer s.hintsMu.Unlock()
	h, ok := s.hints[key]
	return h, ok
}

func (s *Store) setHint(key string, rev uint64, val []byte) {
	s.hintsMu.Lock()
	defer s.hintsMu.Unlock()
	if h, ok := s.hints[key]; ok && h.rev > rev {
		return
	}
	if len(val) > maxHintSize {
		delete(s.hints, key)
		return
	}
	if len(s.hints) >= maxHints {
		clear(s.hints)
	}
	s.hints[key] = kvHint{rev: rev, val: val}
}

func (s *Store) dropHint(key string) {
	s.hintsMu.Lock()
	defer s.hintsMu.Unlock()
	delete(s.hints, key)
}

// putNewer writes a row of the log message seq to key unless the key holds
// a row of that message or a later one. build gets the key's current value
// (nil if none) and returns the new one, or nil to leave the key alone.
func (s *Store) putNewer(ctx context.Context, key string, seq uint64, build func(cur []byte) ([]byte, time.Duration, error)) error {
	cur, rev, hinted := []byte(nil), uint64(0), false
	if h, ok := s.hint(key); ok {
		cur, rev, hinted = h.val, h.rev, true
	}
	for attempt := 0; ; attempt++ {
		if !hinted {
			var err error
			if cur, rev, err = s.kvGet(ctx, key); err != nil {
				return err
			}
		}
		if cur != nil {
			var m rowMeta
			if err := json.Unmarshal(cur, &m); err != nil {
				return fmt.Errorf("row %s: %w", key, err)
			}
			if m.Seq >= seq {
				return nil
			}
		}
		val, ttl, err := build(cur)
		if err != nil || val == nil {
			return err
		}
		_, err = s.kvPut(ctx, key, val, rev, ttl)
		if !errors.Is(err, errCAS) {
			return err
		}
		if attempt >= 20 {
			return fmt.Errorf("row %s: %w", key, err)
		}
		hinted = false
	}
}

// tombstone is the value that deletes a row written before seq.
func (s *Store) tombstone(seq uint64) ([]byte, time.Duration, error) {
	b, err := json.Marshal(rowMeta{Seq: seq, Del: true})
	return b, s.opts.TombstoneTTL, err
}

// threadRow reads a thread's row, nil if there is none.
func (s *Store) threadRow(ctx context.Context, id string) (*threadRow, uint64, error) {
	val, rev, err := s.kvGet(ctx, threadKey(id))
	if err != nil || val == nil {
		return nil, rev, err
	}
	var row threadRow
	if err := json.Unmarshal(val, &row); err != nil {
		return nil, 0, fmt.Errorf("row of thread %s: %w", id, err)
	}
	return &row, rev, nil
}

// scan returns the rows of the keys matching patterns (key patterns of the
// bucket, with wildcards), tombstones left out.
//
// Bulk reads of the bucket are answered by any replica, which may lag the
// leader. So scan first writes a fence, a key of this node, and only takes
// an answer that has that write: the bucket as of the fence, which comes
// after every write acknowledged before the scan began. It asks for the
// last message of every matching key in one request (up to 1024 keys),
// else reads them with an ordered consumer.
func (s *Store) scan(ctx context.Context, patterns ...string) (map[string][]byte, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	fence := "f." + token(s.opts.Node)
	ack, err := s.publish(ctx, s.kvSubject+fence, []byte(nuid.Next()), -1, "", 0)
	if err != nil {
		return nil, fmt.Errorf("fence: %w", err)
	}
	subjects := []string{s.kvSubject + fence}
	for _, p := range patterns {
		subjects = append(subjects, s.kvSubject+p)
	}
	for attempt := range forceConsumerScanAttempts {
		msgs, err := s.directBatch(ctx, s.metaName, msgGetRequest{MultiLast: subjects, UpToSeq: ack.Sequence})
		if err != nil {
			break // too many keys, or no direct gets: use a consumer
		}
		rows := make(map[string][]byte)
		fenced := false
		for _, m := range msgs {
			key := strings.TrimPrefix(m.Subject, s.kvSubject)
			if key == fence {
				fenced = m.Seq == ack.Sequence
				continue
			}
			if err := addRow(rows, key, m.Header, m.Data); err != nil {
				return nil, err
			}
		}
		if fenced {
			return rows, nil
		}
		// The replica that answered lags: ask again.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(1<<attempt) * 5 * time.Millisecond):
		}
	}
	return s.scanConsumer(ctx, fence, ack.Sequence, subjects)
}

var forceConsumerScanAttempts = 4

// addRow adds a key's row to rows unless it is deleted.
func addRow(rows map[string][]byte, key string, hdr nats.Header, data []byte) error {
	if hdr.Get("KV-Operation") != "" {
		delete(rows, key)
		return nil
	}
	var m rowMeta
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("row %s: %w", key, err)
	}
	if m.Del {
		delete(rows, key)
	} else {
		rows[key] = data
	}
	return nil
}

// scanConsumer is scan with an ordered consumer: every message of the keys
// (the bucket keeps one per key), until the fence. Not DeliverLastPerSubject,
// which is the same here but stalls more often (see heartbeat).
func (s *Store) scanConsumer(ctx context.Context, fence string, fenceSeq uint64, subjects []string) (map[string][]byte, error) {
	cons, err := s.metaStream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: subjects,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1024), jetstream.PullExpiry(2*time.Second), jetstream.PullHeartbeat(heartbeat))
	if err != nil {
		return nil, err
	}
	defer it.Stop()
	rows := make(map[string][]byte)
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return nil, err
		}
		key := strings.TrimPrefix(msg.Subject(), s.kvSubject)
		if key == fence {
			md, err := msg.Metadata()
			if err != nil {
				return nil, err
			}
			if md.Sequence.Stream >= fenceSeq {
				return rows, nil
			}
			continue
		}
		if err := addRow(rows, key, msg.Headers(), msg.Data()); err != nil {
			return nil, err
		}
	}
}
