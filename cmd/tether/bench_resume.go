package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/store/sqlitestore"
)

// The resume scenario measures what a client pays to pick a thread up
// again on a freshly started server, as every client does after a deploy,
// against the length of the thread's history. It runs its own server
// (this binary's tether serve, on a data directory it fills), because it
// restarts it before each cold measurement.

// resumeKinds are the requests measured: an SSE stream and a JSON
// catch-up resumed 10 events before the tail, and the thread's snapshot.
var resumeKinds = []string{"sse", "json", "snapshot"}

// resumeWarm is how many times each request is repeated on the warm
// server, after its cold one.
const resumeWarm = 5

// serveCommand returns the command that starts a server; tests replace it.
var serveCommand = func(args ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return exec.Command(exe, append([]string{"serve"}, args...)...), nil
}

// resumeResult is the outcome of the resume scenario.
type resumeResult struct {
	Scenario    string          `json:"scenario"`
	Rounds      int             `json:"rounds"`
	EventBytes  int             `json:"event_bytes"`
	Threads     []resumeHistory `json:"threads"`
	Interrupted bool            `json:"interrupted,omitempty"`
}

// resumeHistory is what was measured on one thread.
type resumeHistory struct {
	Events          int64                    `json:"events"`
	LogBytes        int64                    `json:"log_bytes"`
	CheckpointBytes int                      `json:"checkpoint_bytes"`
	Kinds           map[string]*resumeTiming `json:"kinds"`
}

// resumeTiming is one request's time to the first byte of the answer and
// to its first event (the whole snapshot, for a snapshot), cold (the
// first request of a fresh server) and warm (repeated on it), in ms: the
// median and range over the rounds.
type resumeTiming struct {
	ColdFirstByte  spread `json:"cold_first_byte_ms"`
	ColdFirstEvent spread `json:"cold_first_event_ms"`
	WarmFirstByte  spread `json:"warm_first_byte_ms"`
	WarmFirstEvent spread `json:"warm_first_event_ms"`

	cold, coldEv, warm, warmEv []time.Duration
}

// spread is a median and a range, in ms.
type spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func spreadOf(ds []time.Duration) spread {
	if len(ds) == 0 {
		return spread{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return spread{Median: ms(s[len(s)/2]), Min: ms(s[0]), Max: ms(s[len(s)-1])}
}

func (s spread) String() string {
	return fmt.Sprintf("%s (%s–%s)", fmtMs(s.Median), fmtMs(s.Min), fmtMs(s.Max))
}

func (r *resumeResult) name() string {
	return interrupted(fmt.Sprintf("resume: a thread picked up again on a freshly started server, %d rounds", r.Rounds), r.Interrupted)
}

func (r *resumeResult) rows() [][2]string {
	var rows [][2]string
	for _, h := range r.Threads {
		rows = append(rows, [2]string{fmt.Sprintf("%s events", commas(h.Events)),
			fmt.Sprintf("log %s, checkpoint %s", fmtBytes(float64(h.LogBytes)), fmtBytes(float64(h.CheckpointBytes)))})
		for _, k := range resumeKinds {
			t := h.Kinds[k]
			if t == nil {
				continue
			}
			ev := "first event"
			if k == "snapshot" {
				ev = "whole"
			}
			rows = append(rows,
				[2]string{"  " + k + " cold", fmt.Sprintf("first byte %s, %s %s", t.ColdFirstByte, ev, t.ColdFirstEvent)},
				[2]string{"  " + k + " warm", fmt.Sprintf("first byte %s, %s %s", t.WarmFirstByte, ev, t.WarmFirstEvent)})
		}
	}
	if len(r.Threads) > 1 {
		a, z := r.Threads[0], r.Threads[len(r.Threads)-1]
		for _, k := range resumeKinds {
			ta, tz := a.Kinds[k], z.Kinds[k]
			if ta == nil || tz == nil {
				continue
			}
			ratio := func(x, y spread) string {
				if x.Median <= 0 {
					return "-"
				}
				return strconv.FormatFloat(y.Median/x.Median, 'f', 2, 64) + "×"
			}
			rows = append(rows, [2]string{fmt.Sprintf("%s, %s / %s events", k, commas(z.Events), commas(a.Events)),
				fmt.Sprintf("cold %s / %s, warm %s / %s (first byte / first event)",
					ratio(ta.ColdFirstByte, tz.ColdFirstByte), ratio(ta.ColdFirstEvent, tz.ColdFirstEvent),
					ratio(ta.WarmFirstByte, tz.WarmFirstByte), ratio(ta.WarmFirstEvent, tz.WarmFirstEvent))})
		}
	}
	return rows
}

// resumeThread is a filled thread and the cursor to resume it from.
type resumeThread struct {
	id     string
	cursor tether.Offset // 10 events before the tail
	events int64
	log    int64
	ckpt   int
}

func (b *bencher) resumeScenario(ctx context.Context) (result, error) {
	c := b.c
	dir := c.resumeData
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "tether-bench-resume-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
	}
	var threads []*resumeThread
	for _, n := range c.history {
		th, err := b.fillResume(ctx, dir, n)
		if err != nil {
			return nil, err
		}
		threads = append(threads, th)
	}

	res := &resumeResult{Scenario: "resume", Rounds: c.rounds, EventBytes: c.eventBytes}
	for _, th := range threads {
		h := resumeHistory{Events: th.events, LogBytes: th.log, CheckpointBytes: th.ckpt, Kinds: map[string]*resumeTiming{}}
		for _, k := range resumeKinds {
			h.Kinds[k] = &resumeTiming{}
		}
		res.Threads = append(res.Threads, h)
	}
	for round := range c.rounds {
		for i, th := range threads {
			for _, kind := range resumeKinds {
				if ctx.Err() != nil {
					res.Interrupted = true
					return res.summarize(), nil
				}
				if err := b.measureResume(ctx, dir, th, kind, res.Threads[i].Kinds[kind]); err != nil {
					return nil, err
				}
			}
		}
		fmt.Fprintf(b.stderr, "resume: round %d of %d done\n", round+1, c.rounds)
	}
	return res.summarize(), nil
}

func (r *resumeResult) summarize() *resumeResult {
	for _, h := range r.Threads {
		for _, t := range h.Kinds {
			t.ColdFirstByte, t.ColdFirstEvent = spreadOf(t.cold), spreadOf(t.coldEv)
			t.WarmFirstByte, t.WarmFirstEvent = spreadOf(t.warm), spreadOf(t.warmEv)
		}
	}
	return r
}

// measureResume starts a server on dir, measures one kind of request on
// th once cold and resumeWarm times warm, and stops the server.
func (b *bencher) measureResume(ctx context.Context, dir string, th *resumeThread, kind string, t *resumeTiming) error {
	srv, err := startBenchServer(ctx, dir)
	if err != nil {
		return err
	}
	defer srv.stop()
	client := &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 2}}
	defer client.CloseIdleConnections()
	for i := range resumeWarm + 1 {
		first, ev, err := resumeOnce(ctx, client, srv.url, th, kind)
		if err != nil {
			return duringBench(fmt.Sprintf("%s of a thread of %s events", kind, commas(th.events)), err)
		}
		if i == 0 {
			t.cold, t.coldEv = append(t.cold, first), append(t.coldEv, ev)
		} else {
			t.warm, t.warmEv = append(t.warm, first), append(t.warmEv, ev)
		}
	}
	return nil
}

// resumeOnce makes one request and returns the time to the answer's first
// byte (its head) and to its first event (all of it, for JSON and the
// snapshot).
func resumeOnce(ctx context.Context, client *http.Client, base string, th *resumeThread, kind string) (time.Duration, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	path, accept := "/v1/threads/"+th.id, "application/json"
	switch kind {
	case "sse":
		path, accept = path+"/events", "text/event-stream"
	case "json":
		path += "/events?after=" + string(th.cursor)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Accept", accept)
	if kind == "sse" {
		req.Header.Set("Last-Event-ID", string(th.cursor))
	}
	start := time.Now()
	res, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer res.Body.Close()
	first := time.Since(start)
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(res.Body)
		return 0, 0, serverErr(res.StatusCode, body)
	}
	switch kind {
	case "sse":
		rd := newSSEReader(res.Body, false)
		f, err := rd.next()
		for err == nil && len(f.id) == 0 { // connected
			f, err = rd.next()
		}
		if err != nil {
			return 0, 0, err
		}
		if !tether.Offset(f.id).After(th.cursor) {
			return 0, 0, fmt.Errorf("the stream resumed at %q, not after %s", f.id, th.cursor)
		}
	case "json":
		var body struct{ Events []json.RawMessage }
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
			return 0, 0, err
		}
		if len(body.Events) != 10 {
			return 0, 0, fmt.Errorf("%d events after the cursor, want 10", len(body.Events))
		}
	default:
		var snap tether.Snapshot
		if err := json.NewDecoder(res.Body).Decode(&snap); err != nil {
			return 0, 0, err
		}
	}
	return first, time.Since(start), nil
}

// fillResume makes (or finds, in a data directory kept from an earlier
// run) a thread of about n events, in process: runs of the bench agent,
// each a question and an answer streamed as text.delta events of
// --event-bytes, the last ending 10 events after the cursor.
func (b *bencher) fillResume(ctx context.Context, dir string, n int) (*resumeThread, error) {
	st, err := sqlitestore.Open(filepath.Join(dir, "tether.db"), sqlitestore.Options{})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := engine.New(st, engine.Options{NodeID: "bench-fill", Logger: quiet})
	if err := e.Start(ctx); err != nil {
		return nil, err
	}
	defer e.Close()
	th := &resumeThread{id: fmt.Sprintf("resume-%d-%d", n, b.c.eventBytes)}
	if err := b.fillThread(ctx, e, st, dir, th, n); err != nil {
		return nil, err
	}
	// The checkpoints are written in the background: let them land.
	e.Close()
	return th, sizeResume(ctx, st, th)
}

func (b *bencher) fillThread(ctx context.Context, e *engine.Engine, st *sqlitestore.Store, dir string, th *resumeThread, n int) error {
	cursorFile := filepath.Join(dir, th.id+".cursor")
	if tr, err := st.Thread(ctx, th.id); err == nil {
		if c, err := os.ReadFile(cursorFile); err == nil && tr.Version >= int64(n) {
			th.cursor, th.events = tether.Offset(strings.TrimSpace(string(c))), tr.Version
			fmt.Fprintf(b.stderr, "resume: thread %s of %s events is there already\n", th.id, commas(th.events))
			return nil
		}
		if err := e.DeleteThread(ctx, th.id); err != nil {
			return err
		}
	}
	if _, _, err := e.CreateThread(ctx, th.id, nil); err != nil {
		return err
	}
	fmt.Fprintf(b.stderr, "resume: filling thread %s with %s events\n", th.id, commas(int64(n)))
	delta := strings.Repeat("lorem ipsum dolor sit amet ", b.c.eventBytes/27+1)[:b.c.eventBytes]
	const perRun = 500 // text.delta events per answer
	var events int64
	for k := 0; events < int64(n); k++ {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rc, err := e.CreateRun(ctx, th.id, engine.RunRequest{Agent: benchAgent,
			Input: tether.RunInput{Messages: []tether.InputMessage{{Role: tether.RoleUser, Content: fmt.Sprintf("question %d", k)}}}})
		if err != nil {
			return err
		}
		cl, err := e.Claim(ctx, engine.ClaimRequest{WorkerID: "bench-fill", Agents: []string{benchAgent}, Wait: 5 * time.Second})
		if err != nil || cl == nil || cl.Run.ID != rc.Run.ID {
			return fmt.Errorf("claim the run of the fill: %v", err)
		}
		events += 3
		msg := fmt.Sprintf("answer-%d", k)
		app := func(evs ...*tether.Event) (tether.Offset, error) {
			r, err := e.Append(ctx, cl.Run.ID, cl.Lease.Token, evs)
			if err != nil {
				return "", err
			}
			events += int64(len(evs))
			return r.NextOffset, nil
		}
		if _, err := app(&tether.Event{Type: tether.EventMessageStarted, MessageID: msg, Role: tether.RoleAssistant}); err != nil {
			return err
		}
		deltas := min(perRun, max(int(int64(n)-events-2), 10))
		last := events+int64(deltas)+2 >= int64(n)
		var batch []*tether.Event
		for i := range deltas {
			batch = append(batch, &tether.Event{Type: tether.EventTextDelta, MessageID: msg, Delta: delta})
			if len(batch) == 100 || i == deltas-1 || (last && i == deltas-9) {
				off, err := app(batch...)
				if err != nil {
					return err
				}
				if last && i == deltas-9 {
					th.cursor = off // 8 deltas and 2 ends after it
				}
				batch = nil
			}
		}
		if _, err := app(&tether.Event{Type: tether.EventMessageFinished, MessageID: msg, Status: "done"},
			&tether.Event{Type: tether.EventRunFinished, Status: string(tether.RunDone)}); err != nil {
			return err
		}
	}
	th.events = events
	return os.WriteFile(cursorFile, []byte(th.cursor), 0o600)
}

// sizeResume notes the sizes of a filled thread's log and checkpoint.
func sizeResume(ctx context.Context, st *sqlitestore.Store, th *resumeThread) error {
	if _, data, err := st.Checkpoint(ctx, th.id); err == nil {
		th.ckpt = len(data)
	}
	after := tether.OffsetStart
	for {
		recs, err := st.ReadEvents(ctx, th.id, after, 10000)
		if err != nil {
			return err
		}
		for _, r := range recs {
			th.log += int64(len(r.Data))
		}
		if len(recs) < 10000 {
			return nil
		}
		after = recs[len(recs)-1].Offset
	}
}

// benchServer is a tether serve started by the bench.
type benchServer struct {
	cmd    *exec.Cmd
	url    string
	stderr bytes.Buffer
	done   chan error
}

func startBenchServer(ctx context.Context, dir string) (*benchServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd, err := serveCommand("--data", dir, "--addr", addr, "--log-level", "warn")
	if err != nil {
		return nil, err
	}
	s := &benchServer{cmd: cmd, url: "http://" + addr, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = io.Discard, &s.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start tether serve: %w", err)
	}
	go func() { s.done <- cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/healthz", nil)
		res, err := http.DefaultTransport.RoundTrip(req)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case err := <-s.done:
			return nil, fmt.Errorf("tether serve exited (%v): %s", err, s.stderr.String())
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, errors.New("tether serve did not answer /healthz within 30s")
		}
	}
}

// stop stops the server (SIGTERM, then SIGKILL after 10s) and waits.
func (s *benchServer) stop() {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		_ = s.cmd.Process.Kill()
	}
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}
