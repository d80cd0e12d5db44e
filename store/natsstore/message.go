package natsstore

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// A log message is one committed batch (or one deletion) of one thread: the
// unit of atomicity. Its body is a version byte, the length-prefixed JSON of
// a header, then the events, each as four length-prefixed strings: type, run
// ID, message ID and the event's JSON without its offset (Event.Encode). The
// fields readers filter on stay outside the JSON so that a read never
// decodes an event.
const formatVersion = 1

// header is what a log message says besides its events.
type header struct {
	// ID is the thread's ID (its subject token is a one-way street for
	// humans; the ID is here for them and for checks).
	ID string `json:"id"`
	// Create starts a new incarnation of the thread; Delete ends it (a
	// tombstone, which carries nothing else).
	Create bool `json:"create,omitempty"`
	Delete bool `json:"delete,omitempty"`
	// Prev is the sequence of the thread's previous message, which the
	// publish expected as the last one on the thread's subject (0: none).
	Prev uint64 `json:"prev"`
	// Inc is the sequence of the Create message of the incarnation the
	// batch belongs to; 0 on the Create message itself.
	Inc uint64 `json:"inc,omitempty"`
	// Version is the number of events of the thread before the batch, and
	// Before its last offset then: consumers on other nodes report
	// contiguous batches without any lookup.
	Version int64         `json:"version"`
	Before  tether.Offset `json:"before"`

	Thread    *wireThread    `json:"thread,omitempty"`
	Runs      []*wireRun     `json:"runs,omitempty"`
	Producers []wireProducer `json:"producers,omitempty"`
}

// wireThread is a thread row without its log position (LastOffset), which
// the store derives from the log.
type wireThread struct {
	ID          string          `json:"id"`
	Status      string          `json:"status"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
	CreatedAt   int64           `json:"created"` // Unix ms; the zero time has its own value
	UpdatedAt   int64           `json:"updated"`
	ActiveRunID string          `json:"active_run,omitempty"`
	Owner       string          `json:"owner,omitempty"`
}

func toWireThread(t *tether.Thread) *wireThread {
	return &wireThread{ID: t.ID, Status: string(t.Status), Metadata: t.Metadata,
		CreatedAt: t.CreatedAt.UnixMilli(), UpdatedAt: t.UpdatedAt.UnixMilli(), ActiveRunID: t.ActiveRunID, Owner: t.Owner}
}

func (w *wireThread) thread(last tether.Offset) tether.Thread {
	t := tether.Thread{ID: w.ID, Status: tether.ThreadStatus(w.Status), CreatedAt: fromMillis(w.CreatedAt),
		UpdatedAt: fromMillis(w.UpdatedAt), LastOffset: last, ActiveRunID: w.ActiveRunID, Owner: w.Owner}
	if len(w.Metadata) > 0 {
		t.Metadata = w.Metadata
	}
	return t
}

// wireRun is a run row as the log and the metadata bucket hold it.
type wireRun struct {
	Run       json.RawMessage `json:"run"` // tether.Run
	Key       string          `json:"key,omitempty"`
	Multitask string          `json:"multitask,omitempty"`
	Token     string          `json:"token,omitempty"`
	Owner     string          `json:"owner,omitempty"`
	Node      string          `json:"node,omitempty"`
	Expires   int64           `json:"expires,omitempty"` // Unix ns, 0 when unset
	Resumable bool            `json:"resumable,omitempty"`
	KeyID     string          `json:"key_id,omitempty"` // absent in rows written before leases named their key

	// Not encoded: what the store needs of Run without decoding it.
	id       string
	terminal bool
}

func toWireRun(rr *store.RunRecord) (*wireRun, error) {
	js, err := json.Marshal(rr.Run)
	if err != nil {
		return nil, fmt.Errorf("natsstore: encode run %s: %w", rr.Run.ID, err)
	}
	w := &wireRun{Run: js, Key: rr.IdempotencyKey, Multitask: string(rr.Multitask), Token: rr.Lease.Token,
		Owner: rr.Lease.Owner, Node: rr.Lease.Node, Resumable: rr.Lease.Resumable, KeyID: rr.Lease.KeyID,
		id: rr.Run.ID, terminal: rr.Run.Status.Terminal()}
	if !rr.Lease.ExpiresAt.IsZero() {
		w.Expires = rr.Lease.ExpiresAt.UnixNano()
	}
	return w, nil
}

// init fills in the fields that are not encoded.
func (w *wireRun) init() error {
	var r struct {
		ID     string           `json:"id"`
		Status tether.RunStatus `json:"status"`
	}
	if err := json.Unmarshal(w.Run, &r); err != nil {
		return fmt.Errorf("decode run: %w", err)
	}
	w.id, w.terminal = r.ID, r.Status.Terminal()
	return nil
}

func (w *wireRun) record() (*store.RunRecord, error) {
	rr := &store.RunRecord{IdempotencyKey: w.Key, Multitask: tether.Multitask(w.Multitask),
		Lease: store.Lease{Token: w.Token, Owner: w.Owner, Node: w.Node, Resumable: w.Resumable, KeyID: w.KeyID}}
	if err := json.Unmarshal(w.Run, &rr.Run); err != nil {
		return nil, fmt.Errorf("decode run: %w", err)
	}
	rr.Lease.ExpiresAt = fromNanos(w.Expires)
	return rr, nil
}

type wireProducer struct {
	Key   string `json:"key"`
	Epoch int64  `json:"epoch"`
	Seq   int64  `json:"seq"`
}

// wireEvent is an event of a log message: what a Record needs, the JSON
// without the offset.
type wireEvent struct {
	Type, RunID, MessageID string
	Data                   []byte
}

// encodeBody encodes a log message.
func encodeBody(h *header, evs []wireEvent) ([]byte, error) {
	hj, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("natsstore: encode batch: %w", err)
	}
	n := 1 + 2*binary.MaxVarintLen64 + len(hj)
	for _, e := range evs {
		n += 4*binary.MaxVarintLen64 + len(e.Type) + len(e.RunID) + len(e.MessageID) + len(e.Data)
	}
	b := make([]byte, 0, n)
	b = append(b, formatVersion)
	b = binary.AppendUvarint(b, uint64(len(hj)))
	b = append(b, hj...)
	b = binary.AppendUvarint(b, uint64(len(evs)))
	for _, e := range evs {
		for _, s := range [...][]byte{[]byte(e.Type), []byte(e.RunID), []byte(e.MessageID), e.Data} {
			b = binary.AppendUvarint(b, uint64(len(s)))
			b = append(b, s...)
		}
	}
	return b, nil
}

var errMalformed = errors.New("natsstore: malformed log message")

// decodeHeader decodes the header of a log message and returns the rest of
// the body (the events).
func decodeHeader(body []byte) (*header, []byte, error) {
	if len(body) == 0 || body[0] != formatVersion {
		return nil, nil, errMalformed
	}
	n, k := binary.Uvarint(body[1:])
	if k <= 0 || uint64(len(body)-1-k) < n {
		return nil, nil, errMalformed
	}
	start := 1 + k
	var h header
	if err := json.Unmarshal(body[start:start+int(n)], &h); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errMalformed, err)
	}
	for _, r := range h.Runs {
		if err := r.init(); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", errMalformed, err)
		}
	}
	return &h, body[start+int(n):], nil
}

// decodeEvents decodes the events of a log message (as returned by
// decodeHeader). The strings share no memory with rest, the data does.
func decodeEvents(rest []byte) ([]wireEvent, error) {
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > uint64(len(rest)) {
		return nil, errMalformed
	}
	rest = rest[k:]
	evs := make([]wireEvent, n)
	for i := range evs {
		var f [4][]byte
		for j := range f {
			l, k := binary.Uvarint(rest)
			if k <= 0 || uint64(len(rest)-k) < l {
				return nil, errMalformed
			}
			f[j] = rest[k : k+int(l)]
			rest = rest[k+int(l):]
		}
		evs[i] = wireEvent{Type: string(f[0]), RunID: string(f[1]), MessageID: string(f[2]), Data: f[3]}
	}
	if len(rest) != 0 {
		return nil, errMalformed
	}
	return evs, nil
}

// countEvents returns the number of events of a log message (as returned
// by decodeHeader) without decoding them.
func countEvents(rest []byte) (int, error) {
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > uint64(len(rest)) {
		return 0, errMalformed
	}
	return int(n), nil
}
