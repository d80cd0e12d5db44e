package engine

import (
	"context"
	"errors"
	"fmt"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/runs"
	"github.com/tetherhq/tether/store"
)

// loadPage is how many events a load reads from the store per call.
const loadPage = 1000

// Reasons a load starts over.
var (
	// errLogChanged: the thread was deleted (and maybe created again)
	// while its log was read page by page.
	errLogChanged = errors.New("engine: the thread's log changed while it was read")
	// errBadCheckpoint: the checkpoint does not match the log; the log is
	// folded from its start instead.
	errBadCheckpoint = errors.New("engine: the checkpoint does not match the log")
)

// load makes a thread's committed state, from its latest checkpoint and
// the log after it (or from the whole log), and derives the speculative
// machine from it. Everything it reads is of one incarnation of the
// thread: the first read is one state of the store (store.LoadThread), the
// later pages are anchored by their offsets to that log.
func (e *Engine) load(ctx context.Context, t *thread) error {
	useCheckpoint := true
	for attempt := 0; ; attempt++ {
		err := e.loadOnce(ctx, t, useCheckpoint)
		switch {
		case err == errBadCheckpoint && useCheckpoint:
			useCheckpoint = false
		case err == errLogChanged && attempt < 3:
		case err == errLogChanged:
			return tether.Errorf(tether.CodeUnavailable, "thread %s keeps changing while it loads; retry", t.id)
		default:
			return err
		}
	}
}

func (e *Engine) loadOnce(ctx context.Context, t *thread, useCheckpoint bool) error {
	ld, err := e.st.LoadThread(ctx, t.id, loadPage)
	if err != nil {
		return e.storeErr(err, "thread %s", t.id)
	}
	row := ld.Thread.Thread
	var (
		state *runs.State
		n     int64 // events folded
		ckptN int64 // of them, from the checkpoint
	)
	ckpt := ld.Checkpoint
	if ckpt != nil && useCheckpoint {
		state, ckptN, err = decodeCheckpoint(ckpt.Data, ckpt.Offset, &ld.Thread)
		if err != nil {
			// Never trusted over the log: fold it instead.
			e.log.Warn("checkpoint ignored: the log is folded from its start", "thread", t.id, "offset", ckpt.Offset, "err", err)
			state, ckptN = nil, 0
		}
		n = ckptN
	}
	if state == nil {
		state = runs.NewState(tether.Thread{ID: row.ID, Metadata: row.Metadata, CreatedAt: row.CreatedAt})
		n = 0
		if ckpt != nil {
			// The records start after the checkpoint's offset: fold the
			// log up to it first.
			if n, err = e.foldUpTo(ctx, t.id, state, ckpt.Offset); err != nil {
				return err
			}
		}
	}
	// counted is the events up to the row's last offset: with the
	// checkpoint's count, exactly the thread's version, or the checkpoint
	// lied about how many events it covers.
	counted := n
	tailBytes := 0
	recs := ld.Records
	for {
		for _, r := range recs {
			if err := e.foldRecord(t.id, state, r); err != nil {
				return err
			}
			n++
			tailBytes += len(r.Data)
			if !r.Offset.After(row.LastOffset) {
				counted++
			}
		}
		if len(recs) < loadPage {
			break
		}
		recs, err = e.st.ReadEvents(ctx, t.id, recs[len(recs)-1].Offset, loadPage)
		if errors.Is(err, store.ErrOffsetNotFound) {
			return errLogChanged
		}
		if err != nil {
			return e.storeErr(err, "thread %s", t.id)
		}
	}
	if counted != ld.Thread.Version {
		if ckptN > 0 {
			e.log.Warn("checkpoint ignored: its count of events does not match the log", "thread", t.id,
				"offset", ckpt.Offset, "events", counted, "version", ld.Thread.Version)
			return errBadCheckpoint
		}
		e.log.Error("the thread's log does not hold as many events as its version", "thread", t.id,
			"events", counted, "version", ld.Thread.Version)
	}

	// Batches committed (by another node) while the log was read were
	// kept aside by the notify path: fold them too, skipping what the read
	// already had. The version is what was folded; a commit on a stale one
	// conflicts and is replayed.
	t.rmu.Lock()
	t.state = state
	t.folded = n
	for _, c := range t.early {
		for _, ev := range c.Events {
			e.fold(t, ev)
		}
	}
	t.early = nil
	n = t.folded
	t.spec = state.Machine().Clone()
	t.ckptFolded, t.sinceBytes = ckptN, tailBytes
	if ckptN > 0 {
		t.ckptSize = len(ckpt.Data)
	}
	t.rmu.Unlock()
	t.version, t.committed = n, n
	t.row = tether.Thread{ID: row.ID, Metadata: row.Metadata, CreatedAt: row.CreatedAt, Owner: row.Owner}
	t.extras = make(map[string]*runExtra)
	t.idem = make(map[string]string)
	t.producers = make(map[string]*store.Producer)
	t.prodPending = make(map[string]*pending)
	for _, r := range t.spec.Runs() {
		if r.Status.Terminal() {
			continue
		}
		rr, err := e.runRecord(ctx, t.id, r.ID)
		if err != nil {
			return e.storeErr(err, "run %s", r.ID)
		}
		t.extras[r.ID] = &runExtra{key: rr.IdempotencyKey, multitask: rr.Multitask, lease: rr.Lease, saved: *rr}
		if rr.IdempotencyKey != "" {
			t.idem[rr.IdempotencyKey] = r.ID
		}
	}
	return nil
}

// foldRecord folds one record of the log into a state being loaded.
func (e *Engine) foldRecord(threadID string, state *runs.State, r *tether.Record) error {
	ev, err := r.Decode()
	if err != nil {
		return fmt.Errorf("load thread %s: decode event %s: %w", threadID, r.Offset, err)
	}
	if err := state.Apply(ev); err != nil {
		// A committed event that the machine rejects means the rules
		// changed under an old log. Keep serving what can be folded.
		e.log.Warn("event of the log does not fold", "thread", threadID, "offset", r.Offset, "err", err)
	}
	return nil
}

// foldUpTo folds the log from its start up to and including the event at
// target, which must be an event of the log being loaded: that anchors
// the read to it. A thread deleted and created again since has only
// offsets above target, so the read sees it did not find target
// (errLogChanged).
func (e *Engine) foldUpTo(ctx context.Context, threadID string, state *runs.State, target tether.Offset) (int64, error) {
	var n int64
	after := tether.OffsetStart
	for {
		recs, err := e.st.ReadEvents(ctx, threadID, after, loadPage)
		if errors.Is(err, store.ErrOffsetNotFound) || errors.Is(err, store.ErrNotFound) {
			return 0, errLogChanged
		}
		if err != nil {
			return 0, e.storeErr(err, "thread %s", threadID)
		}
		for _, r := range recs {
			if r.Offset.After(target) {
				return 0, errLogChanged
			}
			if err := e.foldRecord(threadID, state, r); err != nil {
				return 0, err
			}
			n++
			if r.Offset == target {
				return n, nil
			}
		}
		if len(recs) < loadPage {
			return 0, errLogChanged
		}
		after = recs[len(recs)-1].Offset
	}
}
