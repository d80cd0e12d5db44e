package runner_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/agents/demo"
	"github.com/tetherhq/tether/agents/runner"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"))
}

// world is an engine with a runner holding the given agents.
func world(t *testing.T, as map[string]agents.Agent, opts engine.Options) (*engine.Engine, *runner.Runner) {
	t.Helper()
	return worldOn(t, testutil.OpenStore(t, ""), as, opts)
}

// worldOn is world on store st (a wrapper that injects faults).
func worldOn(t *testing.T, st store.Store, as map[string]agents.Agent, opts engine.Options) (*engine.Engine, *runner.Runner) {
	t.Helper()
	e := engine.New(st, opts)
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	rn := runner.New(e, as, runner.Options{})
	rn.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rn.Shutdown(ctx)
		e.Close()
	})
	return e, rn
}

func start(t *testing.T, e *engine.Engine, agent, meta string) tether.Run {
	t.Helper()
	ctx := context.Background()
	if _, _, err := e.CreateThread(ctx, "t1", nil); err != nil {
		t.Fatal(err)
	}
	rc, err := e.CreateRun(ctx, "t1", engine.RunRequest{Agent: agent, Metadata: []byte(meta),
		Input: tether.RunInput{Messages: []tether.InputMessage{{Role: tether.RoleUser, Content: "why"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return rc.Run
}

func waitStatus(t *testing.T, e *engine.Engine, runID string, want tether.RunStatus) *tether.Snapshot {
	t.Helper()
	var snap *tether.Snapshot
	testutil.Eventually(t, 20*time.Second, "run "+string(want), func() bool {
		var err error
		snap, err = e.Run(context.Background(), runID)
		return err == nil && snap.Runs[0].Status == want
	})
	return snap
}

func TestDemoRun(t *testing.T) {
	e, _ := world(t, map[string]agents.Agent{"demo": demo.New()}, engine.Options{})
	run := start(t, e, "demo", `{"demo":{"tokens":40,"delay_ms":0}}`)
	snap := waitStatus(t, e, run.ID, tether.RunDone)
	m := snap.Messages[len(snap.Messages)-1]
	if m.Role != tether.RoleAssistant || m.Status != tether.MessageDone || len(m.Parts) != 3 {
		t.Fatalf("answer: %+v", m)
	}
	if m.Parts[0].Type != tether.PartReasoning || m.Parts[1].Type != tether.PartTool || m.Parts[1].Status != tether.ToolDone || m.Parts[2].Type != tether.PartText {
		t.Fatalf("parts: %+v", m.Parts)
	}
	want := strings.Join(demo.Script("why", demo.Options{Tokens: 40}).Text, " ")
	if m.Parts[2].Text != want {
		t.Fatalf("text %q, want %q", m.Parts[2].Text, want)
	}
}

func TestDemoAskAndFail(t *testing.T) {
	e, _ := world(t, map[string]agents.Agent{"demo": demo.New()}, engine.Options{})
	run := start(t, e, "demo", `{"demo":{"tokens":10,"delay_ms":0,"ask":true}}`)
	snap := waitStatus(t, e, run.ID, tether.RunWaiting)
	if _, err := e.SubmitInput(context.Background(), run.ID, snap.Runs[0].Request.ID, []byte(`"speed"`)); err != nil {
		t.Fatal(err)
	}
	snap = waitStatus(t, e, run.ID, tether.RunDone)
	fa, _ := e.FinalAnswer(context.Background(), "t1", run.ID)
	if !strings.Contains(fa.Content, "speed") {
		t.Fatalf("answer ignores the input: %q", fa.Content)
	}

	rc, err := e.CreateRun(context.Background(), "t1", engine.RunRequest{Agent: "demo", Metadata: []byte(`{"demo":{"tokens":10,"delay_ms":0,"fail":true}}`)})
	if err != nil {
		t.Fatal(err)
	}
	snap = waitStatus(t, e, rc.Run.ID, tether.RunError)
	if snap.Runs[0].Error == nil || snap.Runs[0].Error.Code != "demo_failure" {
		t.Fatalf("failed run: %+v", snap.Runs[0].Error)
	}
}

func TestAgentOutcomes(t *testing.T) {
	as := map[string]agents.Agent{
		"quiet": agents.Func(func(ctx context.Context, s *agents.Session) error {
			id, _ := s.StartMessage(ctx, tether.RoleAssistant)
			return s.Text(ctx, id, "partial") // returns without finishing anything
		}),
		"broken": agents.Func(func(ctx context.Context, s *agents.Session) error {
			return errors.New("secret upstream detail: 500 from api.example")
		}),
		"panics": agents.Func(func(ctx context.Context, s *agents.Session) error { panic("boom") }),
		"slow": agents.Func(func(ctx context.Context, s *agents.Session) error {
			<-ctx.Done()
			return ctx.Err()
		}),
	}
	e, _ := world(t, as, engine.Options{})
	ctx := context.Background()
	run := func(agent string) string {
		tid := "t-" + agent
		e.CreateThread(ctx, tid, nil)
		rc, err := e.CreateRun(ctx, tid, engine.RunRequest{Agent: agent})
		if err != nil {
			t.Fatal(err)
		}
		return rc.Run.ID
	}
	quiet := waitStatus(t, e, run("quiet"), tether.RunDone)
	if m := quiet.Messages[0]; m.Status != tether.MessageDone || m.Parts[0].Text != "partial" {
		t.Fatalf("message left by an agent that returned: %+v", m)
	}
	for _, agent := range []string{"broken", "panics"} {
		snap := waitStatus(t, e, run(agent), tether.RunError)
		if r := snap.Runs[0]; r.Error == nil || r.Error.Code != "agent_error" || strings.Contains(r.Error.Message, "secret") || strings.Contains(r.Error.Message, "boom") {
			t.Fatalf("%s: error %+v", agent, r.Error)
		}
	}
	slow := run("slow")
	waitStatus(t, e, slow, tether.RunRunning)
	if _, err := e.CancelRun(ctx, slow); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e, slow, tether.RunCancelled)
}

func TestShutdownDoesNotWaitForStuckAgents(t *testing.T) {
	defer runner.SetStopWait(200 * time.Millisecond)()
	block := make(chan struct{})
	defer close(block)
	st := testutil.OpenStore(t, "")
	e := engine.New(st, engine.Options{})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	stuck := agents.Func(func(ctx context.Context, s *agents.Session) error {
		<-block // ignores its context
		return nil
	})
	rn := runner.New(e, map[string]agents.Agent{"stuck": stuck}, runner.Options{})
	rn.Start()
	run := start(t, e, "stuck", `{}`)
	waitStatus(t, e, run.ID, tether.RunRunning)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	done := make(chan error)
	go func() { done <- rn.Shutdown(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown waits for an agent that ignores its context")
	}
	snap, _ := e.Run(context.Background(), run.ID)
	if snap.Runs[0].Status != tether.RunAborted {
		t.Fatalf("stuck run: %s", snap.Runs[0].Status)
	}
}

func TestShutdownAbortsAfterGrace(t *testing.T) {
	st := testutil.OpenStore(t, "")
	e := engine.New(st, engine.Options{})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rn := runner.New(e, map[string]agents.Agent{"demo": demo.New()}, runner.Options{})
	rn.Start()
	run := start(t, e, "demo", `{"demo":{"tokens":100000,"delay_ms":5}}`)
	waitStatus(t, e, run.ID, tether.RunRunning)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := rn.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	snap, _ := e.Run(context.Background(), run.ID)
	if r := snap.Runs[0]; r.Status != tether.RunAborted || r.Error == nil || r.Error.Code != "server_shutdown" {
		t.Fatalf("run after shutdown: %+v", r)
	}
}

// An in-process agent reads the thread's state as of its claim and
// changes it; the next run of the thread sees the change.
func TestSessionState(t *testing.T) {
	seen := make(chan string, 2)
	agent := agents.Func(func(ctx context.Context, s *agents.Session) error {
		seen <- string(s.State)
		if s.State == nil {
			return s.SetState(ctx, map[string]any{"runs": []int{1}})
		}
		return s.PatchState(ctx, []map[string]any{{"op": "add", "path": "/runs/-", "value": 2}})
	})
	e, _ := world(t, map[string]agents.Agent{"graph": agent}, engine.Options{})
	run := start(t, e, "graph", `{}`)
	waitStatus(t, e, run.ID, tether.RunDone)
	rc, err := e.CreateRun(context.Background(), "t1", engine.RunRequest{Agent: "graph"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e, rc.Run.ID, tether.RunDone)
	if a, b := <-seen, <-seen; a != "" || b != `{"runs":[1]}` {
		t.Fatalf("the runs saw %q then %q", a, b)
	}
	snap, err := e.Thread(context.Background(), "t1")
	if err != nil {
		t.Fatal(err)
	}
	if string(snap.State) != `{"runs":[1,2]}` {
		t.Fatalf("state %s", snap.State)
	}
}
