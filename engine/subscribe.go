package engine

import (
	"context"
	"errors"
	"io"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/hub"
	"github.com/tetherhq/tether/internal/clip"
	"github.com/tetherhq/tether/runs"
	"github.com/tetherhq/tether/store"
)

// SubscribeRequest says what to follow and from where.
type SubscribeRequest struct {
	// ThreadID follows a whole thread. With RunID it may be empty.
	ThreadID string
	// RunID follows one run; the subscription ends after its run.finished.
	RunID string
	// MessageID follows one message; the subscription ends once the
	// message is finished (by message.finished, or by its run's
	// run.finished, which is then delivered too).
	MessageID string
	// Types, if set, keeps only events of these types.
	Types []string
	// Cursor is where to start: "" for a snapshot and then every later
	// event; tether.OffsetStart for the whole log; tether.OffsetNow for the
	// tail; or the offset of an event, to get every event after it. An
	// offset that is not in the log gets a snapshot with Reset set.
	Cursor tether.Offset
}

// Subscription delivers the events of a thread, run or message in order,
// each once. Create one with Engine.Subscribe; Close it when done.
type Subscription struct {
	ThreadID  string
	RunID     string
	MessageID string
	// Snapshot, if set, is the state to show before the first event: it
	// is as of the offset the events start after.
	Snapshot *tether.Snapshot
	// Tail is the thread's last offset when the subscription started.
	Tail tether.Offset

	e       *Engine
	t       *thread
	sub     *hub.Subscriber
	types   map[string]bool
	msgRun  string // the run of a followed message
	done    bool
	scanned tether.Offset
	closed  bool
}

// Subscribe starts a subscription. It returns not_found for an unknown
// thread, run or message.
func (e *Engine) Subscribe(ctx context.Context, req SubscribeRequest) (*Subscription, error) {
	for attempt := 0; ; attempt++ {
		if !e.Following() {
			return nil, errNoFeed
		}
		s, err := e.subscribe(ctx, req)
		if err == nil && !e.Following() {
			// The feed broke while it subscribed, maybe after the hub's
			// subscribers were ended.
			s.Close()
			return nil, errNoFeed
		}
		if err != errRetired {
			return s, err
		}
		if attempt >= maxLookups {
			return nil, tether.Errorf(tether.CodeUnavailable, "thread %s keeps being dropped from memory; retry", clip.ID(req.ThreadID))
		}
	}
}

// subscribe is one attempt of Subscribe. It returns errRetired if the
// thread's entry was dropped while it subscribed.
func (e *Engine) subscribe(ctx context.Context, req SubscribeRequest) (*Subscription, error) {
	if e.closed.Load() {
		return nil, errClosed
	}
	if req.MessageID == "" && req.Cursor != "" && e.cached(e.threadIDOf(req)) == nil {
		if s, err := e.subscribeCold(ctx, req); err != errNeedLoad {
			return s, err
		}
	}
	var t *thread
	var err error
	if req.RunID != "" {
		t, err = e.threadOfRun(ctx, req.RunID)
		if err == nil && req.ThreadID != "" && req.ThreadID != t.id {
			err = tether.Errorf(tether.CodeNotFound, "run %s not found in thread %s", req.RunID, req.ThreadID)
		}
	} else {
		t, err = e.thread(ctx, req.ThreadID)
	}
	if err != nil {
		return nil, err
	}
	s := &Subscription{ThreadID: t.id, RunID: req.RunID, MessageID: req.MessageID, e: e, t: t}
	if len(req.Types) > 0 {
		s.types = make(map[string]bool, len(req.Types))
		for _, ty := range req.Types {
			s.types[ty] = true
		}
	}
	// What the subscription needs of the state is read under its lock; a
	// copy of the state is taken only to send a snapshot.
	v := t.subView(req)
	if e.mayBeBehind(v, req) {
		// Another node may have committed what the request names (a
		// cursor it handed out, a run it created) before this node was
		// notified: look in the store before calling it unknown.
		if err := e.refresh(ctx, t); err != nil {
			return nil, err
		}
		v = t.subView(req)
	}
	s.Tail = v.offset
	if req.MessageID != "" {
		if !v.hasMsg || (req.RunID != "" && v.msg.RunID != req.RunID) {
			return nil, tether.Errorf(tether.CodeNotFound, "message %s not found", clip.ID(req.MessageID))
		}
		s.msgRun = v.msg.RunID
	}
	if req.RunID != "" && !v.hasRun {
		return nil, tether.Errorf(tether.CodeNotFound, "run %s not found", clip.ID(req.RunID))
	}

	var st *runs.State // the copy, if a snapshot is sent
	snapshot := func(reset bool) tether.Offset {
		st = t.snapshotState()
		off := s.snapshot(st, reset)
		t.wmu.Lock()
		s.Snapshot.Thread.Owner = t.row.Owner // a row's, not the log's (as Thread)
		t.wmu.Unlock()
		return off
	}
	from := req.Cursor
	switch req.Cursor {
	case "":
		from = snapshot(false)
	case tether.OffsetStart:
	case tether.OffsetNow:
		from = v.offset
	default:
		if !req.Cursor.After(v.offset) {
			_, err := e.st.ReadEvents(ctx, t.id, req.Cursor, 1)
			switch {
			case errors.Is(err, store.ErrOffsetNotFound):
				from = snapshot(true)
			case err != nil:
				return nil, e.storeErr(err, "thread %s", t.id)
			}
		} else {
			// Past the tail: no event of this log has this offset.
			from = snapshot(true)
		}
	}
	s.scanned = from
	switch {
	case s.done:
	case st != nil:
		s.done = s.endedBy(st, from)
	default:
		s.done = v.end != "" && !v.end.After(from)
	}
	s.sub = e.hub.Subscribe(t.id, from)
	if t.retired.Load() {
		// Dropped while this subscribed: a delete (here or on another
		// node) may have closed the thread's subscribers before this one
		// registered, and a thread created again with the ID would feed
		// it. Look the thread up again.
		s.sub.Close()
		return nil, errRetired
	}
	e.counters.Subscriptions.Add(1)
	return s, nil
}

// subView is what a subscription needs of a thread's committed state.
type subView struct {
	offset tether.Offset
	hasRun bool // the request's run is in the state
	msg    runs.MessageInfo
	hasMsg bool
	// end is the offset at which the followed message, else run, ended
	// ("" if it has not).
	end tether.Offset
}

// subView reads what req needs of the thread's committed state, in
// O(1): nothing is copied.
func (t *thread) subView(req SubscribeRequest) subView {
	t.rmu.Lock()
	defer t.rmu.Unlock()
	st := t.state
	v := subView{offset: st.Offset()}
	if req.RunID != "" {
		_, v.hasRun = st.Machine().Run(req.RunID)
		v.end = st.RunFinishedAt(req.RunID)
	}
	if req.MessageID != "" {
		v.msg, v.hasMsg = st.Machine().Message(req.MessageID)
		v.end = st.MessageFinishedAt(req.MessageID)
	}
	return v
}

// mayBeBehind reports whether a request names something the state seen
// in v does not hold: an offset after its tail, or a run or message it
// does not know.
func (e *Engine) mayBeBehind(v subView, req SubscribeRequest) bool {
	switch req.Cursor {
	case "", tether.OffsetStart, tether.OffsetNow:
	default:
		if req.Cursor.After(v.offset) {
			return true
		}
	}
	return (req.RunID != "" && !v.hasRun) || (req.MessageID != "" && !v.hasMsg)
}

// snapshot sets the subscription's snapshot from st and returns its offset.
func (s *Subscription) snapshot(st *runs.State, reset bool) tether.Offset {
	var snap *tether.Snapshot
	switch {
	case s.MessageID != "":
		snap, _ = st.MessageSnapshot(s.MessageID)
	case s.RunID != "":
		snap, _ = st.RunSnapshot(s.RunID)
	default:
		snap = st.Snapshot()
	}
	snap.Reset = reset
	s.Snapshot = snap
	return snap.Offset
}

// endedBy reports whether the followed run or message ended at or before
// offset off.
func (s *Subscription) endedBy(st *runs.State, off tether.Offset) bool {
	var end tether.Offset
	switch {
	case s.MessageID != "":
		end = st.MessageFinishedAt(s.MessageID)
	case s.RunID != "":
		end = st.RunFinishedAt(s.RunID)
	default:
		return false
	}
	return end != "" && !end.After(off)
}

// Ready is signalled when Next would not block.
func (s *Subscription) Ready() <-chan struct{} { return s.sub.Ready() }

// Next returns the next events, waiting until there are some. It returns
// io.EOF once a run or message subscription has delivered its terminal
// event, hub.ErrSlow if the subscriber fell too far behind (resume from the
// last offset), hub.ErrClosed if the thread was deleted or the server is
// closing, an unavailable error if the node can no longer follow the
// store's log (feed.go; resume from the last offset, elsewhere).
func (s *Subscription) Next(ctx context.Context) ([]*tether.Record, error) {
	for {
		if s.done {
			return nil, io.EOF
		}
		recs, err := s.sub.Next(ctx)
		if err != nil {
			return nil, s.historyErr(err)
		}
		if out := s.filter(recs); len(out) > 0 || s.done {
			if len(out) == 0 {
				return nil, io.EOF
			}
			return out, nil
		}
	}
}

// TryNext is Next without waiting: it returns nil, nil when nothing is
// ready.
func (s *Subscription) TryNext(ctx context.Context) ([]*tether.Record, error) {
	for {
		if s.done {
			return nil, io.EOF
		}
		recs, err := s.sub.TryNext(ctx)
		if err != nil || len(recs) == 0 {
			return nil, s.historyErr(err)
		}
		if out := s.filter(recs); len(out) > 0 || s.done {
			if len(out) == 0 {
				return nil, io.EOF
			}
			return out, nil
		}
	}
}

// historyErr reports a history read of a thread deleted meanwhile as the
// end of the thread (hub.ErrClosed), like a delete seen live.
func (s *Subscription) historyErr(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return hub.ErrClosed
	}
	return err
}

// filter keeps the records the subscription follows and notes its end.
func (s *Subscription) filter(recs []*tether.Record) []*tether.Record {
	if s.RunID == "" && s.MessageID == "" && s.types == nil {
		s.scanned = recs[len(recs)-1].Offset
		return recs
	}
	out := recs[:0:0]
	for _, r := range recs {
		s.scanned = r.Offset
		match, end := s.match(r)
		if match && (s.types == nil || s.types[r.Type]) {
			out = append(out, r)
		}
		if end {
			s.done = true
			break
		}
	}
	return out
}

func (s *Subscription) match(r *tether.Record) (match, end bool) {
	switch {
	case s.MessageID != "":
		if r.MessageID == s.MessageID {
			return true, r.Type == tether.EventMessageFinished || r.Type == tether.EventMessageCreated
		}
		if r.Type == tether.EventRunFinished && r.RunID == s.msgRun {
			return true, true
		}
		return false, false
	case s.RunID != "":
		if r.RunID == s.RunID {
			return true, r.Type == tether.EventRunFinished
		}
		return false, false
	}
	return true, false
}

// Done reports whether a run or message subscription has delivered its
// terminal event (or it came before the cursor).
func (s *Subscription) Done() bool { return s.done }

// Scanned returns the offset of the last event the subscription looked at,
// delivered or filtered out: the cursor for a long poll to continue from.
func (s *Subscription) Scanned() tether.Offset { return s.scanned }

// Tip returns the thread's last committed offset now.
func (s *Subscription) Tip() tether.Offset {
	if s.t == nil || s.t.retired.Load() {
		// Made without loading the thread, or its state was dropped
		// from memory since (and is no longer kept up to date).
		return s.coldTip()
	}
	s.t.rmu.Lock()
	defer s.t.rmu.Unlock()
	return s.t.state.Offset()
}

// Close ends the subscription.
func (s *Subscription) Close() {
	if s.closed {
		return
	}
	s.closed = true
	s.sub.Close()
	s.e.counters.Subscriptions.Add(-1)
}
