package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	tether "github.com/tetherhq/tether"
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// violation records a breach seen by the traffic itself (an answer the
// protocol does not allow).
func (w *world) violation(format string, args ...any) {
	w.mu.Lock()
	w.bad = append(w.bad, sprintf(format, args...))
	w.mu.Unlock()
}

// entry is one event of a thread's log as the server serves it.
type entry struct {
	offset      string
	epoch       uint64
	typ, run    string
	key         string
	status      string
	code        string
	ts          time.Time
	hash        uint64
	createdRun  string
	startedHere bool
}

// threadLog is the part of a thread's log read so far.
type threadLog struct {
	entries []entry
	keyPos  map[string][]int
}

var checkClient = &http.Client{Timeout: time.Minute}

// noteRead records the time a read of the check took.
func (c *checker) noteRead(d time.Duration) {
	c.slowest = max(c.slowest, d)
}

// checker holds the logs read and checks them against the world.
type checker struct {
	slowest time.Duration // the slowest read of a log page
	w       *world
	url     string
	opts    *options
	logs    map[string]*threadLog
	epoch   uint64 // the epoch of the server now running
	runs    map[string]*runState
	ended   map[string]int // runs ended, by status and code
}

// runState is a run as its thread's log tells it.
type runState struct {
	thread                  string
	started, finishedAt     int // positions, -1 if none
	startEpoch, finishEpoch uint64
	finished                int
	status, code            string
	ts                      time.Time
	last                    int
	startedInProcess        bool
}

func newChecker(w *world, url string, opts *options) *checker {
	return &checker{w: w, url: url, opts: opts, logs: map[string]*threadLog{}}
}

// readLog reads a thread's log after a cursor, all pages.
func (c *checker) readLog(ctx context.Context, thread, after string) ([]json.RawMessage, error) {
	var all []json.RawMessage
	for {
		var a answer
		for try := 0; try < 3; try++ {
			// The check's reads get a long timeout and a retry: a read that
			// is slow (a cold thread right after a restart, on a busy
			// machine) is not a loss. It is counted, and the slowest shown.
			t0 := time.Now()
			a = callWith(ctx, checkClient, "GET", c.url+"/v1/threads/"+thread+"/events?after="+url.QueryEscape(after), nil, "Accept", "application/json")
			c.noteRead(time.Since(t0))
			if a.err == nil {
				break
			}
		}
		if a.err != nil || a.status != 200 {
			return nil, fmt.Errorf("read the log of %s after %s: %d %v %s", thread, after, a.status, a.err, trim(a.body))
		}
		var page struct {
			Events   []json.RawMessage
			Next     string          `json:"next_offset"`
			UpToDate bool            `json:"up_to_date"`
			Snapshot json.RawMessage `json:"snapshot"`
		}
		if err := json.Unmarshal(a.body, &page); err != nil {
			return nil, fmt.Errorf("read the log of %s: %v", thread, err)
		}
		if len(page.Snapshot) > 0 {
			return nil, fmt.Errorf("reading the log of %s after %s got a reset snapshot: that offset is gone from the log", thread, after)
		}
		all = append(all, page.Events...)
		if page.UpToDate {
			return all, nil
		}
		after = page.Next
	}
}

func parseEntry(raw json.RawMessage) (entry, error) {
	var e struct {
		Offset, Type string
		RunID        string `json:"run_id"`
		MessageID    string `json:"message_id"`
		Delta        string
		Status       string
		TS           time.Time
		Error        *struct{ Code string }
		Run          *struct{ ID string }
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return entry{}, err
	}
	epoch, _, err := tether.ParseOffset(tether.Offset(e.Offset))
	if err != nil {
		return entry{}, err
	}
	en := entry{offset: e.Offset, epoch: epoch, typ: e.Type, run: e.RunID, status: e.Status, ts: e.TS, hash: hashOf(raw)}
	if e.Error != nil {
		en.code = e.Error.Code
	}
	if e.Type == "run.created" && e.Run != nil {
		en.createdRun = e.Run.ID
		en.run = e.Run.ID
	}
	en.key = keyOf(e.Type, en.run, e.MessageID, e.Delta)
	return en, nil
}

// refresh brings every thread's log up to date: from where it was read
// last, or (full) from the start, checking that what was read before is
// unchanged.
func (c *checker) refresh(ctx context.Context, full bool) []string {
	var bad []string
	for _, th := range c.w.threads {
		tl := c.logs[th]
		if tl == nil || full {
			old := tl
			tl = &threadLog{keyPos: map[string][]int{}}
			c.logs[th] = tl
			raws, err := c.readLog(ctx, th, "-1")
			if err != nil {
				return append(bad, err.Error())
			}
			bad = append(bad, tl.add(th, raws)...)
			if old != nil {
				for i, e := range old.entries {
					if i >= len(tl.entries) {
						bad = append(bad, sprintf("%s: the log lost its events from %d (%s) on: %d events, %d read before", th, i, e.offset, len(tl.entries), len(old.entries)))
						break
					}
					if n := tl.entries[i]; n.offset != e.offset || n.hash != e.hash {
						bad = append(bad, sprintf("%s: event %d changed: %s %s, read before as %s %s", th, i, n.offset, n.typ, e.offset, e.typ))
						break
					}
				}
			}
			continue
		}
		after := "-1"
		if n := len(tl.entries); n > 0 {
			after = tl.entries[n-1].offset
		}
		raws, err := c.readLog(ctx, th, after)
		if err != nil {
			return append(bad, err.Error())
		}
		bad = append(bad, tl.add(th, raws)...)
	}
	return bad
}

func (tl *threadLog) add(th string, raws []json.RawMessage) []string {
	var bad []string
	for _, raw := range raws {
		e, err := parseEntry(raw)
		if err != nil {
			bad = append(bad, sprintf("%s: event %s: %v", th, trim(raw), err))
			continue
		}
		if n := len(tl.entries); n > 0 && e.offset <= tl.entries[n-1].offset {
			bad = append(bad, sprintf("%s: offset %s after %s: the log is out of order", th, e.offset, tl.entries[n-1].offset))
		}
		if e.key != "" {
			tl.keyPos[e.key] = append(tl.keyPos[e.key], len(tl.entries))
		}
		tl.entries = append(tl.entries, e)
	}
	return bad
}

// check runs every check of a round on logs just refreshed. final adds
// the checks of the end: every run ended, every client has the whole log.
func (c *checker) check(final bool, snap *snapshot) []string {
	w := c.w
	w.mu.Lock()
	bad := append([]string(nil), w.bad...)
	w.bad = nil
	followers := append([]*follower(nil), w.followers...)
	w.mu.Unlock()
	acks, runs := snap.acks, snap.runs

	// Every acknowledged append: once, in order, contiguous, at its offset.
	for _, a := range acks {
		if a.verified {
			continue
		}
		tl := c.logs[a.thread]
		prev := -1
		for i, k := range a.keys {
			ps := tl.keyPos[k]
			switch {
			case len(ps) == 0:
				bad = append(bad, sprintf("run %s: acknowledged event %d of %d (%s) is not in the log of %s", a.run, i+1, len(a.keys), k, a.thread))
			case len(ps) > 1:
				bad = append(bad, sprintf("run %s: acknowledged event %s is in the log %d times (offsets %s and %s)", a.run, k, len(ps), tl.entries[ps[0]].offset, tl.entries[ps[1]].offset))
			case prev >= 0 && ps[0] != prev+1:
				bad = append(bad, sprintf("run %s: acknowledged event %s is at %s, not right after %s: the append is not contiguous or in order", a.run, k, tl.entries[ps[0]].offset, tl.entries[prev].offset))
			}
			if len(ps) > 0 {
				prev = ps[0]
			}
		}
		if a.next != "" && prev >= 0 && tl.entries[prev].offset != a.next {
			bad = append(bad, sprintf("run %s: an append answered next_offset %s, its last event is at %s", a.run, a.next, tl.entries[prev].offset))
		}
		a.verified = true
	}

	// Runs as the logs tell them.
	c.runs = map[string]*runState{}
	for _, th := range w.threads {
		tl := c.logs[th]
		for i, e := range tl.entries {
			if e.run == "" {
				continue
			}
			rs := c.runs[e.run]
			if rs == nil {
				rs = &runState{thread: th, started: -1, finishedAt: -1}
				c.runs[e.run] = rs
			}
			if rs.finishedAt >= 0 {
				bad = append(bad, sprintf("run %s: %s at %s after its run.finished at %s", e.run, e.typ, e.offset, tl.entries[rs.finishedAt].offset))
			}
			rs.last = i
			switch e.typ {
			case "run.started":
				rs.started, rs.startEpoch = i, e.epoch
			case "run.finished":
				rs.finished++
				rs.finishedAt, rs.finishEpoch, rs.status, rs.code, rs.ts = i, e.epoch, e.status, e.code, e.ts
			}
		}
	}
	ended := map[string]int{}
	for _, r := range runs {
		tl := c.logs[r.thread]
		if n := len(tl.keyPos["rc:"+r.id]); n != 1 {
			bad = append(bad, sprintf("run %s: acknowledged, and its run.created is in the log of %s %d times", r.id, r.thread, n))
			continue
		}
		rs := c.runs[r.id]
		if rs.finished > 1 {
			bad = append(bad, sprintf("run %s: %d run.finished events", r.id, rs.finished))
		}
		if rs.finished == 0 {
			switch {
			case final:
				bad = append(bad, sprintf("run %s (%s) never ended", r.id, r.kind))
			case time.Since(r.created) > c.opts.stuckAfter:
				bad = append(bad, sprintf("run %s (%s) is stuck: created %s ago and not ended", r.id, r.kind, time.Since(r.created).Round(time.Second)))
			case r.kind == kindDemo && rs.started >= 0 && rs.startEpoch < c.epoch:
				bad = append(bad, sprintf("run %s: the server's own agent held it when the server was killed (run.started at %s), and it is not ended after the restart",
					r.id, c.logs[r.thread].entries[rs.started].offset))
			}
			continue
		}
		key := rs.status
		if rs.code != "" {
			key += " " + rs.code
		}
		ended[key]++
		restarted := rs.started >= 0 && rs.finishEpoch != rs.startEpoch
		switch {
		case r.kind == kindDemo && restarted && rs.code != "server_restart":
			bad = append(bad, sprintf("run %s: started in one server's life, ended %s %s in the next; want aborted server_restart", r.id, rs.status, rs.code))
		case r.kind == kindExt && rs.code == "server_restart":
			bad = append(bad, sprintf("run %s: an external worker's run ended server_restart", r.id))
		case r.kind == kindExt && rs.code == "worker_lost" && !r.abandoned && rs.ts.Before(r.expiry.Add(-time.Second)):
			bad = append(bad, sprintf("run %s: ended aborted worker_lost at %s, but an answer to its worker had granted a lease until %s",
				r.id, rs.ts.Format(time.RFC3339Nano), r.expiry.Format(time.RFC3339Nano)))
		case r.kind == kindExt && r.abandoned && rs.code != "worker_lost":
			bad = append(bad, sprintf("run %s: its worker left it, and it ended %s %s, not aborted worker_lost", r.id, rs.status, rs.code))
		}
	}
	c.ended = ended

	// Every client's sequence is the log's.
	for _, f := range followers {
		got, done, problems := f.state()
		for _, p := range problems {
			bad = append(bad, sprintf("client %s: %s", f.name, p))
		}
		tl := c.logs[f.thread]
		want := tl.entries
		if f.run != "" {
			rs := c.runs[f.run]
			if !done || rs == nil || rs.finishedAt < 0 {
				if final && !done {
					bad = append(bad, sprintf("client %s: never received its end", f.name))
				}
				continue
			}
			f.mu.Lock()
			start := f.start
			f.mu.Unlock()
			want = nil
			for _, e := range tl.entries[:rs.finishedAt+1] {
				if e.run == f.run && e.offset > start {
					want = append(want, e)
				}
			}
		}
		if msg := compareSeq(got, want, f.run != "" || final); msg != "" {
			bad = append(bad, sprintf("client %s: %s", f.name, msg))
		}
		if f.run != "" {
			f.verified = true
		}
	}
	w.mu.Lock()
	kept := w.followers[:0]
	for _, f := range w.followers {
		if !f.verified {
			kept = append(kept, f)
		}
	}
	w.followers = kept
	w.mu.Unlock()
	sort.Strings(bad)
	return bad
}

// snapshot is what the clients had been told before the logs were read:
// only that must be in them.
type snapshot struct {
	acks []*ack
	runs []runInfo
}

func (w *world) snapshot() *snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := &snapshot{acks: w.acks[:len(w.acks):len(w.acks)]}
	for _, r := range w.runs {
		s.runs = append(s.runs, *r)
	}
	return s
}

// compareSeq compares what a client received with the log. With whole,
// it must have all of it; else a prefix (it may be behind, or ahead of
// the log as read).
func compareSeq(got []seen, want []entry, whole bool) string {
	n := min(len(got), len(want))
	for i := 0; i < n; i++ {
		g, e := got[i], want[i]
		if g.offset == e.offset && g.hash == e.hash {
			continue
		}
		switch {
		case g.offset == e.offset:
			return sprintf("event %d at %s differs from the log's", i, g.offset)
		case i > 0 && g.offset <= got[i-1].offset:
			return sprintf("event %d is %s after %s: a duplicate or a reorder", i, g.offset, got[i-1].offset)
		case g.offset > e.offset:
			return sprintf("event %d is %s, the log has %s (%s) there: a gap", i, g.offset, e.offset, e.typ)
		default:
			return sprintf("event %d is %s, which is not in the log (the log has %s there)", i, g.offset, e.offset)
		}
	}
	if whole && len(got) != len(want) {
		return sprintf("received %d events, the log has %d", len(got), len(want))
	}
	return ""
}

func epochOf(offset string) uint64 {
	e, _ := strconv.ParseUint(strings.SplitN(offset, "_", 2)[0], 10, 64)
	return e
}

func sortStrings(s []string) { sort.Strings(s) }
