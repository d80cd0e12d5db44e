package client

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
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// workerEnv is a real server (engine and API over httptest, SQLite under
// t.TempDir()) and two clients of it: the worker's, whose requests go
// through faults, and a plain one for the test's own calls.
type workerEnv struct {
	t      *testing.T
	url    string
	e      *engine.Engine
	c      *Client // the worker's
	admin  *Client
	faults *faults
	logs   *testutil.SyncBuffer // the worker's log
}

func newWorkerEnv(t *testing.T, eopts engine.Options) *workerEnv {
	t.Helper()
	return newWorkerEnvAPI(t, eopts, api.Options{}, "")
}

// newWorkerEnvAPI is newWorkerEnv with the API's options; token (a key of
// aopts) is the token of the worker's and the test's clients.
func newWorkerEnvAPI(t *testing.T, eopts engine.Options, aopts api.Options, token string) *workerEnv {
	t.Helper()
	return newWorkerEnvNet(t, eopts, aopts, token, nil)
}

// newWorkerEnvNet is newWorkerEnvAPI whose clients reach the server over
// the in-memory connections of pl if it is not nil (for a test in a
// synctest bubble, where a goroutine in a network call would keep the
// bubble's clock from moving).
func newWorkerEnvNet(t *testing.T, eopts engine.Options, aopts api.Options, token string, pl *pipeListener) *workerEnv {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	st := testutil.OpenStore(t, "")
	if eopts.LeaseTTL == 0 {
		eopts.LeaseTTL = 3 * time.Second
	}
	eopts.SweepInterval = 50 * time.Millisecond
	eopts.Logger = quiet
	e := engine.New(st, eopts)
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	aopts.Logger = quiet
	srv := api.New(e, aopts)
	hs := httptest.NewUnstartedServer(srv.Handler())
	base, plain := &http.Transport{}, &http.Transport{}
	if pl != nil {
		hs.Listener.Close()
		hs.Listener = pl
		base.DialContext, plain.DialContext = pl.dial, pl.dial
	}
	hs.Start()
	f := &faults{base: base, hangs: make(chan int, 16)}
	t.Cleanup(func() {
		srv.Shutdown()
		f.base.(*http.Transport).CloseIdleConnections()
		plain.CloseIdleConnections()
		hs.Close()
		e.Close()
	})
	opts := func(tr http.RoundTripper) *Options {
		return &Options{Token: token, HTTPClient: &http.Client{Transport: tr}, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	}
	return &workerEnv{t: t, url: hs.URL, e: e, c: New(hs.URL, opts(f)), admin: New(hs.URL, opts(plain)), faults: f, logs: &testutil.SyncBuffer{}}
}

// start runs a worker with the agents until the test ends.
func (v *workerEnv) start(opts WorkerOptions) *Worker {
	v.t.Helper()
	return v.startOn(v.c, opts)
}

// startOn is start with the worker on client c.
func (v *workerEnv) startOn(c *Client, opts WorkerOptions) *Worker {
	v.t.Helper()
	if opts.ID == "" {
		opts.ID = "test-worker"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(v.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	opts.ClaimWait = 2 * time.Second
	w, err := c.NewWorker(opts)
	if err != nil {
		v.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	v.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				v.t.Errorf("worker: %v", err)
			}
		case <-time.After(30 * time.Second):
			v.t.Errorf("the worker did not stop")
		}
	})
	return w
}

// newRun creates a thread and a run of agent with one user message.
func (v *workerEnv) newRun(agent, prompt string) tether.Run {
	v.t.Helper()
	ctx := context.Background()
	th, err := v.admin.CreateThread(ctx, "", nil)
	if err != nil {
		v.t.Fatal(err)
	}
	run, err := v.admin.CreateRun(ctx, th.ID, RunRequest{
		Agent: agent,
		Input: tether.RunInput{Messages: []tether.InputMessage{{Role: tether.RoleUser, Content: prompt}}},
	})
	if err != nil {
		v.t.Fatal(err)
	}
	return run
}

// waitRun polls the run until cond holds and returns it.
func (v *workerEnv) waitRun(id, what string, cond func(tether.Run) bool) tether.Run {
	v.t.Helper()
	var run tether.Run
	testutil.Eventually(v.t, 30*time.Second, what, func() bool {
		snap, err := v.admin.Run(context.Background(), id)
		if err != nil {
			v.t.Fatalf("get run: %v", err)
		}
		run = snap.Runs[0]
		return cond(run)
	})
	return run
}

func (v *workerEnv) waitEnded(id string) tether.Run {
	v.t.Helper()
	return v.waitRun(id, "the run to end", func(r tether.Run) bool { return r.Status.Terminal() })
}

// events reads the run's whole log.
func (v *workerEnv) events(id string) []*tether.Event {
	v.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*tether.Event
	for u, err := range v.admin.Subscribe(ctx, SubscribeRequest{RunID: id, After: tether.OffsetStart}) {
		if err != nil {
			v.t.Fatalf("read the log: %v", err)
		}
		out = append(out, u.Event)
	}
	return out
}

// text joins the text deltas of events.
func text(evs []*tether.Event) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Type == tether.EventTextDelta {
			b.WriteString(e.Delta)
		}
	}
	return b.String()
}

func count(evs []*tether.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// faults is a RoundTripper that can lose the answers of appends after the
// server processed them, hold them until the request is cancelled, or
// refuse every connection as a server that is down would.
type faults struct {
	base http.RoundTripper

	mu      sync.Mutex
	appends int          // appends seen, counting retries
	drop    map[int]bool // appends (numbered from 1) whose answer is lost
	hang    map[int]bool // appends whose answer never comes
	downAt  int          // the server goes down after processing this append (0: never)
	down    bool
	hangs   chan int                   // gets the number of each append held
	open    map[io.ReadCloser]struct{} // bodies being read: cut when the server goes down
}

var errInjected = errors.New("injected fault: the connection broke before the answer")

func (f *faults) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	n, drop, hang, down := 0, false, false, f.down
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/events") && !down {
		f.appends++
		n = f.appends
		drop, hang = f.drop[n], f.hang[n]
		if n == f.downAt {
			drop = true
			f.goDown()
		}
	}
	f.mu.Unlock()
	if down {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	resp, err := f.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if !drop && !hang {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.down {
			resp.Body.Close()
			return nil, errInjected
		}
		if f.open == nil {
			f.open = make(map[io.ReadCloser]struct{})
		}
		resp.Body = &trackedBody{ReadCloser: resp.Body, f: f}
		f.open[resp.Body] = struct{}{}
		return resp, nil
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if hang {
		f.hangs <- n
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return nil, errInjected
}

// goDown refuses every new connection and cuts the answers being read,
// as a server killed with SIGKILL would. f.mu is held.
func (f *faults) goDown() {
	f.down = true
	for b := range f.open {
		b.(*trackedBody).ReadCloser.Close()
	}
}

// trackedBody is an answer's body that faults can cut.
type trackedBody struct {
	io.ReadCloser
	f *faults
}

func (b *trackedBody) Close() error {
	b.f.mu.Lock()
	delete(b.f.open, b)
	b.f.mu.Unlock()
	return b.ReadCloser.Close()
}

func (f *faults) set(fn func(f *faults)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *faults) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.appends
}

// speaker streams one assistant message, one text.delta per word, with a
// pause before each.
func speaker(words []string, pause time.Duration) agents.Func {
	return func(ctx context.Context, s *agents.Session) error {
		msg, err := s.StartMessage(ctx, tether.RoleAssistant)
		if err != nil {
			return err
		}
		for _, w := range words {
			if err := sleep(ctx, pause); err != nil {
				return err
			}
			if err := s.Text(ctx, msg, w); err != nil {
				return err
			}
		}
		return s.FinishMessage(ctx, msg, tether.MessageDone)
	}
}

func wordList(n int) []string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = fmt.Sprintf("w%d ", i)
	}
	return ws
}

// checkOnce checks that the log holds the message of speaker once, whole.
func checkOnce(t *testing.T, evs []*tether.Event, words []string) {
	t.Helper()
	if got, want := text(evs), strings.Join(words, ""); got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	if n := count(evs, tether.EventTextDelta); n != len(words) {
		t.Errorf("%d text.delta events, want %d", n, len(words))
	}
	for _, typ := range []string{tether.EventMessageStarted, tether.EventMessageFinished, tether.EventRunFinished, tether.EventRunStarted} {
		if n := count(evs, typ); n != 1 {
			t.Errorf("%d %s events, want 1", n, typ)
		}
	}
}

func TestWorkerStreamsRun(t *testing.T) {
	v := newWorkerEnv(t, engine.Options{})
	full := agents.Func(func(ctx context.Context, s *agents.Session) error {
		msg, err := s.StartMessage(ctx, tether.RoleAssistant)
		if err != nil {
			return err
		}
		steps := []func() error{
			func() error { return s.Reasoning(ctx, msg, "thinking about "+s.Prompt()) },
			func() error { return s.ToolStarted(ctx, msg, "c1", "search") },
			func() error { return s.ToolDelta(ctx, msg, "c1", `{"q":"x"}`) },
			func() error { return s.ToolFinished(ctx, msg, "c1", nil, map[string]int{"hits": 3}, nil) },
			func() error { return s.Custom(ctx, "progress", map[string]int{"pct": 50}) },
			func() error { return s.Text(ctx, msg, "You said: ") },
			func() error { return s.Text(ctx, msg, s.Prompt()) },
			func() error { return s.FinishMessage(ctx, msg, tether.MessageDone) },
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return err
			}
		}
		return nil
	})
	w := v.start(WorkerOptions{Agents: map[string]agents.Agent{"full": full}})
	run := v.newRun("full", "hello")
	if got := v.waitEnded(run.ID); got.Status != tether.RunDone || got.WorkerID != w.ID() || got.Attempt != 1 {
		t.Fatalf("run ended %s (worker %q, attempt %d), want done by %q", got.Status, got.WorkerID, got.Attempt, w.ID())
	}
	evs := v.events(run.ID)
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	want := "run.created message.created run.started message.started reasoning.delta tool.started tool.delta tool.finished custom text.delta text.delta message.finished run.finished"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("events:\n  %s\nwant\n  %s", got, want)
	}
	fa, err := v.admin.FinalAnswer(context.Background(), run.ThreadID)
	if err != nil || fa.Content != "You said: hello" || !fa.Complete {
		t.Errorf("final answer %+v, %v", fa, err)
	}
}

func TestWorkerWaitInput(t *testing.T) {
	v := newWorkerEnv(t, engine.Options{})
	asker := agents.Func(func(ctx context.Context, s *agents.Session) error {
		msg, err := s.StartMessage(ctx, tether.RoleAssistant)
		if err != nil {
			return err
		}
		val, err := s.Wait(ctx, "question", map[string]string{"q": "tone?"})
		if err != nil {
			return err
		}
		var tone string
		if err := json.Unmarshal(val, &tone); err != nil {
			return err
		}
		if err := s.Text(ctx, msg, "in a "+tone+" tone"); err != nil {
			return err
		}
		return s.FinishMessage(ctx, msg, tether.MessageDone)
	})
	v.start(WorkerOptions{Agents: map[string]agents.Agent{"asker": asker}})
	run := v.newRun("asker", "hi")
	waiting := v.waitRun(run.ID, "the run to wait", func(r tether.Run) bool { return r.Status == tether.RunWaiting })
	if waiting.Request == nil || waiting.Request.Kind != "question" {
		t.Fatalf("request %+v", waiting.Request)
	}
	if err := v.admin.SubmitInput(context.Background(), run.ID, waiting.Request.ID, "dry"); err != nil {
		t.Fatal(err)
	}
	if got := v.waitEnded(run.ID); got.Status != tether.RunDone {
		t.Fatalf("run ended %s %+v", got.Status, got.Error)
	}
	if got := text(v.events(run.ID)); got != "in a dry tone" {
		t.Errorf("text %q", got)
	}
}

// streamer emits text ("x" deltas) until its context ends, and reports
// why it ended: the cause of its context, or the error of an Emit. Then,
// as careless agents do, it emits once more with its dead context ("late"),
// which must not reach the log.
func streamer(started chan<- struct{}, ended chan<- error) agents.Func {
	return func(ctx context.Context, s *agents.Session) error {
		msg, err := s.StartMessage(ctx, tether.RoleAssistant)
		if err != nil {
			return err
		}
		close(started)
		for {
			err := sleep(ctx, 5*time.Millisecond)
			if err == nil {
				err = s.Text(ctx, msg, "x")
			}
			if err != nil {
				if ctx.Err() != nil {
					err = context.Cause(ctx)
					_ = s.Text(ctx, msg, "late")
				}
				ended <- err
				return err
			}
		}
	}
}

func TestWorkerCancel(t *testing.T) {
	// A long cancel grace: the run can only end cancelled this fast if the
	// worker confirms it.
	v := newWorkerEnv(t, engine.Options{CancelGrace: time.Minute})
	started, ended := make(chan struct{}), make(chan error, 1)
	v.start(WorkerOptions{Agents: map[string]agents.Agent{"s": streamer(started, ended)}})
	run := v.newRun("s", "go")
	<-started
	if _, err := v.admin.CancelRun(context.Background(), run.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent was not stopped")
	}
	if got := v.waitEnded(run.ID); got.Status != tether.RunCancelled {
		t.Fatalf("run ended %s", got.Status)
	}
	evs := v.events(run.ID)
	last := evs[len(evs)-1]
	if last.Type != tether.EventRunFinished || last.Status != string(tether.RunCancelled) || count(evs, tether.EventRunFinished) != 1 {
		t.Errorf("last event %+v", last)
	}
	if got := text(evs); strings.Trim(got, "x") != "" {
		t.Errorf("text %q: an Emit with a dead context was appended", got)
	}
}

func TestWorkerAgentError(t *testing.T) {
	v := newWorkerEnv(t, engine.Options{})
	failing := agents.Func(func(ctx context.Context, s *agents.Session) error {
		if _, err := s.StartMessage(ctx, tether.RoleAssistant); err != nil {
			return err
		}
		return errors.New("connect to db: password hunter2 rejected")
	})
	panicking := agents.Func(func(ctx context.Context, s *agents.Session) error {
		panic("boom at line 42")
	})
	v.start(WorkerOptions{Agents: map[string]agents.Agent{"failing": failing, "panicking": panicking}})
	for agent, secret := range map[string]string{"failing": "hunter2", "panicking": "boom at line 42"} {
		run := v.newRun(agent, "hi")
		got := v.waitEnded(run.ID)
		if got.Status != tether.RunError || got.Error == nil || *got.Error != (tether.ErrorInfo{Code: "agent_error", Message: "The agent failed."}) {
			t.Errorf("%s: run ended %s with %+v", agent, got.Status, got.Error)
		}
		for _, e := range v.events(run.ID) {
			if b, _ := json.Marshal(e); bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s: the log shows the agent's error: %s", agent, b)
			}
		}
		if !strings.Contains(v.logs.String(), secret) {
			t.Errorf("%s: the worker's log does not have the agent's error:\n%s", agent, v.logs.String())
		}
	}
}

// TestWorkerDroppedAnswers loses the answers of some appends after the
// server committed them: the retries, with the same Producer-Seq, are
// duplicates, and the log holds every event once.
func TestWorkerDroppedAnswers(t *testing.T) {
	v := newWorkerEnv(t, engine.Options{})
	v.faults.set(func(f *faults) { f.drop = map[int]bool{1: true, 2: true, 3: true, 7: true, 12: true} })
	words := wordList(20)
	v.start(WorkerOptions{Agents: map[string]agents.Agent{"sp": speaker(words, 0)}})
	run := v.newRun("sp", "hi")
	if got := v.waitEnded(run.ID); got.Status != tether.RunDone {
		t.Fatalf("run ended %s %+v", got.Status, got.Error)
	}
	checkOnce(t, v.events(run.ID), words)
	// message.started, 20 words, message.finished, run.finished; 5 retried.
	if n := v.faults.count(); n != 23+5 {
		t.Errorf("%d appends, want %d", n, 23+5)
	}
}

// TestWorkerServerDown takes the server away right after it committed an
// append, for a while shorter than the lease: the worker retries, keeps
// its lease and finishes the run, each event once. On the clock of a
// synctest bubble, so that the second away is a second, not whatever a
// loaded machine makes of it against the 2s lease.
func TestWorkerServerDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newWorkerEnvNet(t, engine.Options{LeaseTTL: 2 * time.Second}, api.Options{}, "", newPipeListener())
		v.faults.set(func(f *faults) { f.downAt = 8 })
		words := wordList(20)
		v.start(WorkerOptions{Agents: map[string]agents.Agent{"sp": speaker(words, 5*time.Millisecond)}})
		run := v.newRun("sp", "hi")
		testutil.Eventually(t, 10*time.Second, "the server to go down", func() bool {
			var down bool
			v.faults.set(func(f *faults) { down = f.down })
			return down
		})
		time.Sleep(time.Second)
		v.faults.set(func(f *faults) { f.down = false })
		if got := v.waitEnded(run.ID); got.Status != tether.RunDone {
			t.Fatalf("run ended %s %+v", got.Status, got.Error)
		}
		checkOnce(t, v.events(run.ID), words)
	})
}

// TestWorkerGivesUp keeps the server away past the lease: the agent's
// Emit fails with lease_lost instead of blocking, its context ends, and
// the server aborts the run.
func TestWorkerGivesUp(t *testing.T) {
	v := newWorkerEnv(t, engine.Options{LeaseTTL: 500 * time.Millisecond})
	started, ended := make(chan struct{}), make(chan error, 1)
	v.start(WorkerOptions{Agents: map[string]agents.Agent{"s": streamer(started, ended)}})
	run := v.newRun("s", "go")
	<-started
	v.faults.set(func(f *faults) { f.goDown() })
	select {
	case err := <-ended:
		if !errors.Is(err, tether.ErrLeaseLost) {
			t.Errorf("the agent ended with %v, want a lease_lost error", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the agent is still blocked")
	}
	v.faults.set(func(f *faults) { f.down = false })
	got := v.waitEnded(run.ID)
	if got.Status != tether.RunAborted || got.Error == nil || got.Error.Code != engine.ReasonWorkerLost {
		t.Fatalf("run ended %s %+v, want aborted worker_lost", got.Status, got.Error)
	}
}

// TestWorkerInDoubtAppend: an append is committed but its answer never
// comes, and the agent's context ends meanwhile (a cancel). The worker
// sends it again (a duplicate) before confirming the cancel, so the cancel
// is not mistaken for a duplicate and the event lands once.
func TestWorkerInDoubtAppend(t *testing.T) {
	v := newWorkerEnv(t, engine.Options{CancelGrace: time.Minute})
	v.faults.set(func(f *faults) { f.hang = map[int]bool{5: true} })
	started, ended := make(chan struct{}), make(chan error, 1)
	v.start(WorkerOptions{Agents: map[string]agents.Agent{"s": streamer(started, ended)}})
	run := v.newRun("s", "go")
	<-v.faults.hangs
	if _, err := v.admin.CancelRun(context.Background(), run.ID); err != nil {
		t.Fatal(err)
	}
	if got := v.waitEnded(run.ID); got.Status != tether.RunCancelled {
		t.Fatalf("run ended %s", got.Status)
	}
	evs := v.events(run.ID)
	if got := text(evs); got != "xxxx" {
		t.Errorf("text %q, want 4 deltas (the 5th append is message.started plus 4)", got)
	}
	if last := evs[len(evs)-1]; last.Type != tether.EventRunFinished || last.Status != string(tether.RunCancelled) {
		t.Errorf("last event %+v", last)
	}
}

// TestWorkerHeartbeat: an agent that emits nothing for several lease TTLs
// keeps its run, thanks to the heartbeats. What is tested is the worker's
// heartbeat on its clock against the server's expiry on its own: both run
// on the clock of a synctest bubble, so that a loaded machine cannot make
// a heartbeat late (a TTL of a second left it two thirds of a second).
func TestWorkerHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newWorkerEnvNet(t, engine.Options{LeaseTTL: time.Second}, api.Options{}, "", newPipeListener())
		idle := agents.Func(func(ctx context.Context, s *agents.Session) error {
			if err := sleep(ctx, 2500*time.Millisecond); err != nil {
				return err
			}
			_, err := s.StartMessage(ctx, tether.RoleAssistant)
			return err
		})
		v.start(WorkerOptions{Agents: map[string]agents.Agent{"idle": idle}})
		run := v.newRun("idle", "hi")
		if got := v.waitEnded(run.ID); got.Status != tether.RunDone {
			t.Fatalf("run ended %s %+v", got.Status, got.Error)
		}
	})
}

// pipeListener is a listener of in-memory connections (net.Pipe), which a
// client reaches with dial.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	c, s := net.Pipe()
	select {
	case l.conns <- s:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "tether.test" }

// TestWorkerShutdown: when Run's context ends, the agents are cancelled
// and Run returns without finishing their runs; the server aborts them
// once their lease expires.
func TestWorkerShutdown(t *testing.T) {
	v := newWorkerEnv(t, engine.Options{LeaseTTL: 500 * time.Millisecond})
	started, ended := make(chan struct{}), make(chan error, 1)
	w, err := v.c.NewWorker(WorkerOptions{ID: "w", Agents: map[string]agents.Agent{"s": streamer(started, ended)}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	run := v.newRun("s", "go")
	<-started
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	if err := <-ended; !errors.Is(err, errShutdown) {
		t.Errorf("the agent ended with %v", err)
	}
	got := v.waitEnded(run.ID)
	if got.Status != tether.RunAborted || got.Error.Code != engine.ReasonWorkerLost {
		t.Fatalf("run ended %s %+v, want aborted worker_lost", got.Status, got.Error)
	}
}

// TestWorkerRunDeleted: the thread is deleted mid-run; the agent's context
// ends.
func TestWorkerRunDeleted(t *testing.T) {
	v := newWorkerEnv(t, engine.Options{})
	started, ended := make(chan struct{}), make(chan error, 1)
	v.start(WorkerOptions{Agents: map[string]agents.Agent{"s": streamer(started, ended)}})
	run := v.newRun("s", "go")
	<-started
	if err := v.admin.DeleteThread(context.Background(), run.ThreadID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent was not stopped")
	}
}

func TestWorkerConcurrency(t *testing.T) {
	v := newWorkerEnv(t, engine.Options{})
	var running, most atomic.Int32
	ag := agents.Func(func(ctx context.Context, s *agents.Session) error {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		return sleep(ctx, 50*time.Millisecond)
	})
	v.start(WorkerOptions{Agents: map[string]agents.Agent{"a": ag}, Concurrency: 3})
	var runs []tether.Run
	for range 8 {
		runs = append(runs, v.newRun("a", "hi"))
	}
	for _, r := range runs {
		if got := v.waitEnded(r.ID); got.Status != tether.RunDone {
			t.Errorf("run %s ended %s", r.ID, got.Status)
		}
	}
	if m := most.Load(); m > 3 {
		t.Errorf("%d agents ran at once, want at most 3", m)
	}
}

func TestNewWorker(t *testing.T) {
	c := New("http://127.0.0.1:1", nil)
	if _, err := c.NewWorker(WorkerOptions{}); err == nil {
		t.Error("no agents: no error")
	}
	if _, err := c.NewWorker(WorkerOptions{Agents: map[string]agents.Agent{"a": nil}}); err == nil {
		t.Error("nil agent: no error")
	}
	if _, err := c.NewWorker(WorkerOptions{ID: strings.Repeat("x", 256), Agents: map[string]agents.Agent{"a": speaker(nil, 0)}}); err == nil {
		t.Error("long ID: no error")
	}
	w, err := c.NewWorker(WorkerOptions{Agents: map[string]agents.Agent{"a": speaker(nil, 0)}})
	if err != nil || !strings.HasSuffix(w.ID(), fmt.Sprintf("-%d", os.Getpid())) {
		t.Errorf("worker %v, %v", w, err)
	}
}

// TestWorkerRefusedClaim: a token the server refuses stops Run with the
// error, instead of retrying forever.
func TestWorkerRefusedClaim(t *testing.T) {
	c, _ := serve(t, func(n int, s seen, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusUnauthorized, `{"error":{"code":"unauthorized","message":"bad token"}}`)
	})
	w, err := c.NewWorker(WorkerOptions{Agents: map[string]agents.Agent{"a": speaker(nil, 0)}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(context.Background()); tether.CodeOf(err) != tether.CodeUnauthorized {
		t.Fatalf("Run: %v", err)
	}
}

// A claim answered 429 or 503 with Retry-After is made again no sooner
// than it says (up to MaxBackoff), as REST calls, subscriptions and the
// worker's appends are: the claim loop took only its backoff, a few
// milliseconds, and asked again at once.
func TestWorkerClaimWaitsOutRetryAfter(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			ctx, cancel := context.WithCancel(testCtx(t))
			defer cancel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "1")
				writeJSON(w, status, `{"error":{"code":"rate_limited","message":"slow down"}}`)
			}))
			t.Cleanup(srv.Close)
			h := &delays{}
			c := New(srv.URL, &Options{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Second})
			w, err := c.NewWorker(WorkerOptions{Agents: map[string]agents.Agent{"a": speaker(nil, 0)}, Logger: slog.New(h)})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			testutil.Eventually(t, 10*time.Second, "a retried claim", func() bool {
				h.mu.Lock()
				defer h.mu.Unlock()
				return len(h.d) > 0
			})
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.d[0] < time.Second {
				t.Fatalf("delays %v, want the first at least the Retry-After, 1s", h.d)
			}
		})
	}
}

// TestWorkerFinishAfterCancel: an agent that, once a client cancelled the
// run, ends it itself with its dead context (Finish cancelled) gets its
// run ended cancelled by the worker, not by the server once the lease or
// the cancel grace runs out.
func TestWorkerFinishAfterCancel(t *testing.T) {
	v := newWorkerEnv(t, engine.Options{CancelGrace: time.Hour, LeaseTTL: time.Hour})
	started := make(chan struct{})
	ag := agents.Func(func(ctx context.Context, s *agents.Session) error {
		close(started)
		<-ctx.Done()
		return s.Finish(ctx, tether.RunCancelled, nil)
	})
	v.start(WorkerOptions{Agents: map[string]agents.Agent{"a": ag}})
	run := v.newRun("a", "go")
	<-started
	if _, err := v.admin.CancelRun(context.Background(), run.ID); err != nil {
		t.Fatal(err)
	}
	got := v.waitEnded(run.ID)
	if got.Status != tether.RunCancelled {
		t.Fatalf("run ended %s", got.Status)
	}
	if n := count(v.events(run.ID), tether.EventRunFinished); n != 1 {
		t.Errorf("%d run.finished", n)
	}
}

// holder is a RoundTripper that holds the requests hold picks, before
// they are sent, until they are cancelled.
type holder struct {
	base http.RoundTripper
	hold func(*http.Request) bool
}

func (h *holder) RoundTrip(req *http.Request) (*http.Response, error) {
	if h.hold(req) {
		if req.Body != nil {
			req.Body.Close()
		}
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return h.base.RoundTrip(req)
}

// TestWorkerInDoubtFinishThenCancel: the agent's run.finished done is in
// flight (not yet at the server) when a client cancels the run, which
// ends the agent's context and so the append. The worker sends it again,
// the server refuses it (conflict: a cancelled run may only end
// cancelled), and the worker ends the run cancelled at once instead of
// leaving it to the cancel grace.
func TestWorkerInDoubtFinishThenCancel(t *testing.T) {
	v := newWorkerEnv(t, engine.Options{CancelGrace: time.Hour, LeaseTTL: time.Hour})
	var appends atomic.Int32
	held := make(chan struct{})
	h := &holder{base: v.faults, hold: func(r *http.Request) bool {
		// The second append (run.finished), its first try.
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/events") && appends.Add(1) == 2 {
			close(held)
			return true
		}
		return false
	}}
	c := New(v.url, &Options{HTTPClient: &http.Client{Transport: h}, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	ag := agents.Func(func(ctx context.Context, s *agents.Session) error {
		if _, err := s.StartMessage(ctx, tether.RoleAssistant); err != nil {
			return err
		}
		return s.Finish(ctx, tether.RunDone, nil)
	})
	v.startOn(c, WorkerOptions{Agents: map[string]agents.Agent{"a": ag}})
	run := v.newRun("a", "go")
	<-held
	if _, err := v.admin.CancelRun(context.Background(), run.ID); err != nil {
		t.Fatal(err)
	}
	if got := v.waitEnded(run.ID); got.Status != tether.RunCancelled {
		t.Fatalf("run ended %s", got.Status)
	}
	if n := count(v.events(run.ID), tether.EventRunFinished); n != 1 {
		t.Errorf("%d run.finished", n)
	}
}

// TestWorkerHugeAppend: an Emit over the server's limits (an event over
// 1 MiB, a body over 4 MiB) is refused too_large, not retried until the
// lease is lost, and the run ends error.
func TestWorkerHugeAppend(t *testing.T) {
	for name, evs := range map[string]int{"event": 1, "body": 6} {
		t.Run(name, func(t *testing.T) {
			v := newWorkerEnv(t, engine.Options{})
			emitted := make(chan error, 1)
			ag := agents.Func(func(ctx context.Context, s *agents.Session) error {
				msg, err := s.StartMessage(ctx, tether.RoleAssistant)
				if err != nil {
					return err
				}
				size := 900 << 10
				if evs == 1 {
					size = 1200 << 10
				}
				var batch []*tether.Event
				for range evs {
					batch = append(batch, &tether.Event{Type: tether.EventTextDelta, MessageID: msg, Delta: strings.Repeat("x", size)})
				}
				err = s.Emit(ctx, batch...)
				emitted <- err
				return err
			})
			v.start(WorkerOptions{Agents: map[string]agents.Agent{"a": ag}})
			run := v.newRun("a", "go")
			if err := <-emitted; tether.CodeOf(err) != tether.CodeTooLarge {
				t.Errorf("Emit: %v, want too_large", err)
			}
			if got := v.waitEnded(run.ID); got.Status != tether.RunError {
				t.Errorf("run ended %s %+v", got.Status, got.Error)
			}
		})
	}
}

// TestWorkerLeaseLostThenClaims: the heartbeats of a quiet agent hang, so
// its lease expires and the server aborts the run: the agent's context
// ends, a late Emit (with another context) appends nothing, and the
// worker claims and runs the next run.
func TestWorkerLeaseLostThenClaims(t *testing.T) {
	v := newWorkerEnv(t, engine.Options{LeaseTTL: 500 * time.Millisecond})
	var block atomic.Bool
	block.Store(true)
	hb := &holder{base: v.faults, hold: func(r *http.Request) bool {
		return block.Load() && strings.HasSuffix(r.URL.Path, "/heartbeat")
	}}
	c := New(v.url, &Options{HTTPClient: &http.Client{Transport: hb}, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	ended := make(chan error, 1)
	var n atomic.Int32
	ag := agents.Func(func(ctx context.Context, s *agents.Session) error {
		if n.Add(1) > 1 {
			return nil
		}
		msg, err := s.StartMessage(ctx, tether.RoleAssistant)
		if err != nil {
			return err
		}
		<-ctx.Done()
		ended <- context.Cause(ctx)
		_ = s.Text(context.Background(), msg, "late")
		return ctx.Err()
	})
	v.startOn(c, WorkerOptions{Agents: map[string]agents.Agent{"a": ag}, Concurrency: 1})
	run := v.newRun("a", "go")
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the agent was not stopped")
	}
	if got := v.waitEnded(run.ID); got.Status != tether.RunAborted {
		t.Fatalf("run ended %s", got.Status)
	}
	block.Store(false)
	run2 := v.newRun("a", "again")
	if got := v.waitEnded(run2.ID); got.Status != tether.RunDone {
		t.Fatalf("second run ended %s", got.Status)
	}
	if evs := v.events(run.ID); count(evs, tether.EventTextDelta) != 0 || count(evs, tether.EventRunFinished) != 1 {
		t.Errorf("the late Emit was appended, or not one run.finished")
	}
}

// TestWorkerTwoWorkers: two workers claim the same agent's burst of runs
// at once: each run is started once and runs once, at most 2 per worker.
func TestWorkerTwoWorkers(t *testing.T) {
	v := newWorkerEnv(t, engine.Options{})
	var running, most, total atomic.Int32
	ag := agents.Func(func(ctx context.Context, s *agents.Session) error {
		total.Add(1)
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		msg, err := s.StartMessage(ctx, tether.RoleAssistant)
		if err != nil {
			return err
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
		return s.Text(ctx, msg, "hi")
	})
	ctxs := []context.CancelFunc{}
	dones := []chan error{}
	for i := range 2 {
		w, err := v.c.NewWorker(WorkerOptions{ID: "w" + string(rune('0'+i)), Agents: map[string]agents.Agent{"a": ag}, Concurrency: 2, ClaimWait: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		ctxs = append(ctxs, cancel)
		dones = append(dones, done)
	}
	var runs []tether.Run
	for range 20 {
		runs = append(runs, v.newRun("a", "hi"))
	}
	for _, r := range runs {
		got := v.waitEnded(r.ID)
		if got.Status != tether.RunDone || got.Attempt != 1 {
			t.Errorf("run %s ended %s attempt %d", r.ID, got.Status, got.Attempt)
		}
		evs := v.events(r.ID)
		if count(evs, tether.EventRunStarted) != 1 || count(evs, tether.EventRunFinished) != 1 || count(evs, tether.EventTextDelta) != 1 {
			t.Errorf("run %s: events off", r.ID)
		}
	}
	if m := most.Load(); m > 4 {
		t.Errorf("%d at once", m)
	}
	if total.Load() != 20 {
		t.Errorf("%d agent calls", total.Load())
	}
	for i := range ctxs {
		ctxs[i]()
		if err := <-dones[i]; err != nil {
			t.Error(err)
		}
	}
}

// TestWorkerResumableShutdown: a Resumable worker stopped mid-run leaves
// the run to the server, which hands it to the next worker once the lease
// expires (attempt 2), as the documentation promises.
func TestWorkerResumableShutdown(t *testing.T) {
	v := newWorkerEnv(t, engine.Options{LeaseTTL: 500 * time.Millisecond})
	started := make(chan struct{}, 1)
	ag := agents.Func(func(ctx context.Context, s *agents.Session) error {
		msg, err := s.StartMessage(ctx, tether.RoleAssistant)
		if err != nil {
			return err
		}
		if s.Run.Attempt == 1 {
			started <- struct{}{}
			for {
				if err := sleep(ctx, 5*time.Millisecond); err != nil {
					return err
				}
				if err := s.Text(ctx, msg, "x"); err != nil {
					return err
				}
			}
		}
		return s.Text(ctx, msg, "resumed")
	})
	w, err := v.c.NewWorker(WorkerOptions{ID: "wa", Agents: map[string]agents.Agent{"a": ag}, Resumable: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	run := v.newRun("a", "go")
	<-started
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	v.start(WorkerOptions{ID: "wb", Agents: map[string]agents.Agent{"a": ag}, Resumable: true})
	got := v.waitEnded(run.ID)
	if got.Status != tether.RunDone || got.Attempt != 2 {
		t.Fatalf("run ended %s attempt %d", got.Status, got.Attempt)
	}
	evs := v.events(run.ID)
	if count(evs, tether.EventRunStarted) != 2 || count(evs, tether.EventRunFinished) != 1 {
		t.Errorf("events off")
	}
}

// flakyHeartbeats loses the answer of every third heartbeat after the
// server applied it and answers the next 503 with Retry-After.
type flakyHeartbeats struct {
	base http.RoundTripper
	n    atomic.Int32
}

func (d *flakyHeartbeats) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := d.base.RoundTrip(req)
	if err != nil || !strings.HasSuffix(req.URL.Path, "/heartbeat") {
		return resp, err
	}
	switch d.n.Add(1) % 3 {
	case 1: // applied, answer lost
		resp.Body.Close()
		return nil, errInjected
	case 2: // 503 with Retry-After
		resp.Body.Close()
		return &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {"1"}, "Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(`{"error":{"code":"unavailable","message":"x"}}`)), Request: req}, nil
	}
	return resp, nil
}

// TestWorkerFlakyHeartbeats: a quiet agent keeps its 3 s lease for 10 s
// through heartbeats whose answers are lost or 503: each is retried. On
// the clock of a synctest bubble.
func TestWorkerFlakyHeartbeats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newWorkerEnvNet(t, engine.Options{LeaseTTL: 3 * time.Second}, api.Options{}, "", newPipeListener())
		d := &flakyHeartbeats{base: v.faults}
		c := New(v.url, &Options{HTTPClient: &http.Client{Transport: d}, MinBackoff: 5 * time.Millisecond, MaxBackoff: 300 * time.Millisecond})
		idle := agents.Func(func(ctx context.Context, s *agents.Session) error {
			if err := sleep(ctx, 10*time.Second); err != nil {
				return err
			}
			_, err := s.StartMessage(ctx, tether.RoleAssistant)
			return err
		})
		v.startOn(c, WorkerOptions{Agents: map[string]agents.Agent{"idle": idle}})
		run := v.newRun("idle", "hi")
		if got := v.waitEnded(run.ID); got.Status != tether.RunDone {
			t.Fatalf("run ended %s %+v", got.Status, got.Error)
		}
	})
}
