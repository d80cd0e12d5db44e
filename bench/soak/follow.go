package main

import (
	"bufio"
	"context"
	"encoding/json"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// follower is one SSE client of a thread or a run. It starts from -1 (the
// whole log, no snapshot) and resumes with Last-Event-ID after every cut,
// whether the server died or the client hung up on purpose.
type follower struct {
	name, thread, run string

	mu       sync.Mutex
	got      []seen
	ended    bool     // a run follower received its end frame
	problems []string // what the client saw that the protocol forbids
	verified bool     // a run follower checked against the log: dropped
	start    string   // a run follower: the offset of its first snapshot
}

// seen is one event received: its id and a hash of its data.
type seen struct {
	offset string
	hash   uint64
}

func hashOf(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

var sseClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

// follow runs a follower until ctx ends (a run follower: until its end
// frame).
func (w *world) follow(ctx context.Context, url, path, thread, run string, seed uint64) {
	f := &follower{name: path, thread: thread, run: run}
	w.addFollower(f)
	rng := rand.New(rand.NewPCG(seed, 7))
	for first := true; ctx.Err() == nil; first = false {
		if !first {
			w.stats.resumes.Add(1)
			if !pause(ctx, time.Duration(20+rng.IntN(80))*time.Millisecond) {
				return
			}
		}
		// A client may also hang up by itself, now and then.
		cut := time.Duration(500+rng.IntN(5000)) * time.Millisecond
		if f.connect(ctx, url+path, cut, w) {
			return
		}
	}
}

// connect reads one connection. It reports whether the follower is done.
func (f *follower) connect(ctx context.Context, url string, cut time.Duration, w *world) bool {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(cctx, "GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	f.mu.Lock()
	switch n := len(f.got); {
	case n > 0:
		req.Header.Set("Last-Event-ID", f.got[n-1].offset)
	case f.start != "":
		req.Header.Set("Last-Event-ID", f.start)
	case f.run == "":
		q := req.URL.Query()
		q.Set("after", "-1")
		req.URL.RawQuery = q.Encode()
	}
	// A run client starts without a cursor, as a page does: a snapshot
	// first (reading a run from -1 would scan its thread from the start).
	f.mu.Unlock()
	res, err := sseClient.Do(req)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 503 {
			f.problem("%s answered %d %s", url, res.StatusCode, b)
		}
		return false
	}
	timer := time.AfterFunc(cut, func() { w.stats.cuts.Add(1); cancel() })
	defer timer.Stop()
	rd := bufio.NewReaderSize(res.Body, 64<<10)
	var id, event string
	var data []byte
	for {
		line, err := rd.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A long data line: read the rest of it.
			rest, err2 := rd.ReadBytes('\n')
			line = append(append([]byte(nil), line...), rest...)
			err = err2
		}
		if err != nil {
			return false
		}
		s := strings.TrimRight(string(line), "\n")
		switch {
		case s == "":
			if event != "" || id != "" {
				if done := f.frame(id, event, data); done {
					return true
				}
			}
			id, event, data = "", "", nil
		case strings.HasPrefix(s, "id: "):
			id = s[4:]
		case strings.HasPrefix(s, "event: "):
			event = s[7:]
		case strings.HasPrefix(s, "data: "):
			data = []byte(s[6:])
		}
	}
}

// frame takes one frame; it reports whether the follower is done.
func (f *follower) frame(id, event string, data []byte) bool {
	switch event {
	case "connected", "ping", "reconnect":
		return false
	case "snapshot":
		f.mu.Lock()
		first := f.run != "" && f.start == "" && len(f.got) == 0
		if first {
			var snap struct {
				Offset string
				Reset  bool
			}
			if json.Unmarshal(data, &snap) != nil || snap.Reset || snap.Offset == "" {
				first = false
			} else {
				f.start = snap.Offset
			}
		}
		f.mu.Unlock()
		if !first {
			f.problem("a snapshot (%s) after resuming from %s: a reset, but a crash loses nothing committed", trim(data), f.last())
		}
		return false
	case "end":
		if f.run != "" && strings.Contains(string(data), "run_finished") {
			f.mu.Lock()
			f.ended = true
			f.mu.Unlock()
			return true
		}
		f.problem("end %s", data)
		return true
	}
	if id == "" {
		f.problem("a %s frame without id", event)
		return false
	}
	f.mu.Lock()
	f.got = append(f.got, seen{offset: id, hash: hashOf(data)})
	f.mu.Unlock()
	return false
}

func (f *follower) last() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.got) == 0 {
		return "-1"
	}
	return f.got[len(f.got)-1].offset
}

func (f *follower) problem(format string, args ...any) {
	f.mu.Lock()
	f.problems = append(f.problems, sprintf(format, args...))
	f.mu.Unlock()
}

// state returns a copy of what the follower received.
func (f *follower) state() (got []seen, ended bool, problems []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.got...), f.ended, append([]string(nil), f.problems...)
}

func trim(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
