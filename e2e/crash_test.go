package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestKill9MidRun kills the server with SIGKILL in the middle of a demo run
// that several clients follow, and starts it again on the same data. The
// run must end aborted (server_restart) with its running message aborted;
// every event a client saw must be in the log at the same offset with the
// same JSON; and each client, resuming from its last event, must get the
// rest of the run up to its run.finished, nothing twice and nothing missing.
func TestKill9MidRun(t *testing.T) {
	s := start(t, "")
	tid, rid := s.demoRun(t, "What survives a crash?", `{"demo":{"tokens":5000,"delay_ms":5}}`)

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	paths := []string{"/v1/runs/" + rid + "/events", "/v1/runs/" + rid + "/events", "/v1/runs/" + rid + "/events",
		"/v1/threads/" + tid + "/events", "/v1/threads/" + tid + "/events"}
	var fs []*follower
	for i, p := range paths {
		fs = append(fs, s.follow(ctx, fmt.Sprintf("client %d (%s)", i, p), p, followOptions{After: "-1", Resume: true, UntilRunFinished: true}))
	}
	eventually(t, 60*time.Second, "every client to see 100 events", func() bool {
		for _, f := range fs {
			if f.count() < 100 {
				return false
			}
		}
		return true
	})
	s.kill9()
	for _, f := range fs {
		if err := f.wait(); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if !f.down {
			t.Fatalf("%s stopped, but not because the server went down", f.name)
		}
		for _, e := range f.seen() {
			if e.Type == "run.finished" {
				t.Fatalf("%s saw the run finish before the kill: the run is too short for this test", f.name)
			}
		}
	}
	s.restart()

	run, msgs := s.getRun(t, rid)
	if run.Status != "aborted" || run.Error == nil || run.Error.Code != "server_restart" {
		t.Errorf("after the restart the run is %s with error %+v, want aborted with code server_restart", run.Status, run.Error)
	}
	assistant := 0
	for _, m := range msgs {
		if m.Role == "assistant" {
			assistant++
			if m.Status != "aborted" {
				t.Errorf("assistant message %s is %s, want aborted", m.ID, m.Status)
			}
		}
		if m.Status == "running" {
			t.Errorf("message %s is still running", m.ID)
		}
	}
	if assistant != 1 {
		t.Errorf("%d assistant messages, want 1", assistant)
	}

	log := s.readLog(t, "/v1/threads/"+tid+"/events")
	idx := logIndex(log)
	finished := 0
	for _, e := range log {
		if e.Type == "run.finished" {
			finished++
		}
	}
	if finished != 1 || log[len(log)-1].Type != "run.finished" || log[len(log)-1].Status != "aborted" {
		t.Errorf("the log has %d run.finished; its last event is %s", finished, log[len(log)-1].Raw)
	}
	for _, f := range fs {
		checkSeenInLog(t, f.name, f.seen(), idx)
	}
	if t.Failed() {
		return
	}

	// Each client resumes from its last event, on its own stream.
	var wg sync.WaitGroup
	for i, f := range fs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := s.follow(ctx, f.name+" resumed", paths[i], followOptions{Resume: true, UntilRunFinished: true, Prior: f.seen()})
			if err := r.wait(); err != nil {
				t.Errorf("%s: %v", r.name, err)
				return
			}
			sameSequence(t, r.name, r.seen(), log)
		}()
	}
	wg.Wait()
}

// TestNoPhantomEvents kills the server with SIGKILL while an external
// worker appends complete messages as fast as it can from several
// goroutines and 10 subscribers follow the thread. After a restart, every
// event a subscriber saw and every batch the worker got a 2xx for must be
// in the log at the same offset; a batch cut by the kill must be in the log
// whole or not at all; and the worker's lease must still work.
func TestNoPhantomEvents(t *testing.T) {
	for _, mode := range []struct {
		name  string
		flags []string
	}{{"default", nil}, {"fsync", []string{"--fsync"}}} {
		t.Run(mode.name, func(t *testing.T) { testNoPhantomEvents(t, mode.flags) })
	}
}

// attempt is one append of a complete message and what came of it.
type attempt struct {
	id  string // the message id
	res appendResult
}

func testNoPhantomEvents(t *testing.T, flags []string) {
	s := start(t, "", flags...)
	tid, l := s.externalRun(t, "burst")

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var subs []*follower
	for i := range 10 {
		subs = append(subs, s.follow(ctx, fmt.Sprintf("subscriber %d", i), "/v1/threads/"+tid+"/events", followOptions{After: "-1", Resume: true}))
	}
	for _, f := range subs {
		<-f.connected
	}

	const (
		goroutines = 4
		words      = 3 // text.deltas per message: 5 events per batch
	)
	var (
		mu       sync.Mutex
		attempts []attempt
		acked    atomic.Int64
		killed   atomic.Bool
		wg       sync.WaitGroup
	)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				id := fmt.Sprintf("g%d-m%d", g, i)
				res := s.appendEvents(ctx, l, message(id, "one ", "two ", "three"))
				mu.Lock()
				attempts = append(attempts, attempt{id, res})
				mu.Unlock()
				switch {
				case res.Status == http.StatusOK && res.Err == nil:
					acked.Add(1)
				case killed.Load() || ctx.Err() != nil:
					return // the server went down under this append
				default:
					t.Errorf("append %s before the kill: %d %v %s", id, res.Status, res.Err, res.Body)
					return
				}
			}
		}()
	}
	eventually(t, 60*time.Second, "1000 appends", func() bool { return acked.Load() >= 1000 || t.Failed() })
	killed.Store(true)
	s.kill9()
	wg.Wait()
	for _, f := range subs {
		if err := f.wait(); err != nil {
			t.Errorf("%s: %v", f.name, err)
		}
	}
	if t.Failed() {
		return
	}
	s.restart()

	log := s.readLog(t, "/v1/threads/"+tid+"/events")
	idx := logIndex(log)
	perMessage := map[string][]logEvent{}
	for _, e := range log {
		if e.MessageID != "" {
			perMessage[e.MessageID] = append(perMessage[e.MessageID], e)
		}
	}
	seenTotal := 0
	for _, f := range subs {
		seen := f.seen()
		seenTotal += len(seen)
		checkSeenInLog(t, f.name, seen, idx)
	}
	ok, lost, landed := 0, 0, 0
	for _, a := range attempts {
		evs := perMessage[a.id]
		if n := len(evs); n != 0 && n != words+2 {
			t.Errorf("message %s has %d of its %d events in the log: a batch was cut", a.id, n, words+2)
			continue
		}
		if a.res.Status != http.StatusOK {
			if len(evs) > 0 {
				landed++ // committed; the answer was lost with the process
			} else {
				lost++
			}
			continue
		}
		ok++
		switch e, found := idx[a.res.Next]; {
		case len(evs) == 0:
			t.Errorf("append %s got 200 (next_offset %s) but none of its events is in the log", a.id, a.res.Next)
		case !found || e.MessageID != a.id || e.Type != "message.finished":
			t.Errorf("append %s got next_offset %s, but the log has there %s", a.id, a.res.Next, e.Raw)
		case evs[len(evs)-1].Offset != a.res.Next:
			t.Errorf("append %s: its last event is at %s, next_offset said %s", a.id, evs[len(evs)-1].Offset, a.res.Next)
		}
	}
	t.Logf("%d appends acknowledged, %d cut by the kill (%d of them committed); %d log events; subscribers saw %d events in all",
		ok, lost+landed, landed, len(log), seenTotal)

	// The worker's lease survived the restart: it finishes its run.
	res := s.appendEvents(t.Context(), l, append(message("after-restart", "done"),
		map[string]any{"type": "run.finished", "status": "done"}))
	if res.Status != http.StatusOK {
		t.Fatalf("append after the restart: %d %v %s", res.Status, res.Err, res.Body)
	}
	if run := s.waitRunEnded(t, l.RunID); run.Status != "done" {
		t.Errorf("run ended %s, want done", run.Status)
	}

	// Each subscriber resumes from the last event it saw before the kill
	// and gets the rest of the log, to the run's end.
	log = s.readLog(t, "/v1/threads/"+tid+"/events")
	var rs []*follower
	for _, f := range subs {
		rs = append(rs, s.follow(ctx, f.name+" resumed", "/v1/threads/"+tid+"/events",
			followOptions{Resume: true, UntilRunFinished: true, Prior: f.seen()}))
	}
	for _, r := range rs {
		if err := r.wait(); err != nil {
			t.Errorf("%s: %v", r.name, err)
			continue
		}
		sameSequence(t, r.name, r.seen(), log)
	}
}

// TestSecondServerOnSameData starts a second tether serve on the data
// directory of a running one: two writers would each keep the next event
// id in memory and hand out the same offsets. The second must refuse to
// start, saying why, and leave the first serving.
func TestSecondServerOnSameData(t *testing.T) {
	s := start(t, "")
	tid := s.createThread(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--addr", freeAddr(t), "--data", s.data)
	cmd.Env = cleanEnv()
	setDeathSignal(cmd)
	out, err := cmd.CombinedOutput()
	if err == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("a second server on the same data directory: %v, want exit status 1\n%s", err, out)
	}
	// Said in the operator's words: another server on this data
	// directory, not the Go type that holds the lock ("or Store").
	if !strings.Contains(string(out), "open in another process") || !strings.Contains(string(out), "data directory") || strings.Contains(string(out), "Store") {
		t.Errorf("the second server did not say the store is open elsewhere, in the operator's words:\n%s", out)
	}
	if th := s.threadRow(t, tid); th.ID != tid {
		t.Fatalf("the first server after the second one's try: thread %+v", th)
	}
	s.createThread(t)
}
