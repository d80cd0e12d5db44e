package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store/natsstore"
	"github.com/tetherhq/tether/store/natsstore/natstest"
)

// none accepts no name by itself, as tether serve does for names that are
// not in-process.
func none(string) bool { return false }

// A run of an external agent is refused before any worker claimed it
// (after a deploy or a cold start), unless the name is declared: by the
// configuration, or through the API, which a restart keeps.
func TestDeclaredAgentsAreAcceptedWithoutAClaim(t *testing.T) {
	dir := t.TempDir()
	st := testutil.OpenStore(t, dir)
	e := newEngine(t, st, engine.Options{Declared: []string{"configured"}, AcceptAgent: none})
	mustThread(t, e, "t1")
	_, err := e.CreateRun(ctxT(t), "t1", engine.RunRequest{Agent: "mine", Input: userInput("hi")})
	wantCode(t, err, tether.CodeBadRequest) // nobody declared it, no worker asked

	mustRun(t, e, "t1", engine.RunRequest{Agent: "configured", Input: userInput("hi"), Multitask: tether.MultitaskEnqueue})
	if _, created, err := e.DeclareAgent(ctxT(t), "mine"); err != nil || !created {
		t.Fatalf("declare: created %v, %v", created, err)
	}
	if _, created, err := e.DeclareAgent(ctxT(t), "mine"); err != nil || created {
		t.Fatalf("declare again: created %v, %v; want an existing declaration", created, err)
	}
	mustRun(t, e, "t1", engine.RunRequest{Agent: "mine", Input: userInput("hi"), Multitask: tether.MultitaskEnqueue})
	wantCode(t, e.RemoveAgent(ctxT(t), "configured"), tether.CodeConflict)
	wantCode(t, e.RemoveAgent(ctxT(t), "nobody"), tether.CodeNotFound)
	_, _, err = e.DeclareAgent(ctxT(t), "")
	wantCode(t, err, tether.CodeBadRequest)

	list, err := e.Agents(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(list[0].Name, list[0].Declared, " ", list[1].Name, list[1].Declared, list[1].DeclaredAt.IsZero())
	if len(list) != 2 || got != "configuredconfig mineapifalse" {
		t.Fatalf("agents: %+v", list)
	}
	e.Close()
	st.Close()

	// A cold start: the declaration is in the store, no worker has asked.
	e2 := newEngine(t, testutil.OpenStore(t, dir), engine.Options{AcceptAgent: none})
	mustRun(t, e2, "t1", engine.RunRequest{Agent: "mine", Input: userInput("again"), Multitask: tether.MultitaskEnqueue})
	if err := e2.RemoveAgent(ctxT(t), "mine"); err != nil {
		t.Fatal(err)
	}
	_, err = e2.CreateRun(ctxT(t), "t1", engine.RunRequest{Agent: "mine", Input: userInput("hi"), Multitask: tether.MultitaskEnqueue})
	wantCode(t, err, tether.CodeBadRequest)
}

// On a store shared by several nodes a declaration made through one node
// holds on all, at once.
func TestDeclaredAgentsHoldOnEveryNode(t *testing.T) {
	url := natstest.StartServer(t).ClientURL()
	var es [2]*engine.Engine
	for i := range es {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ns, err := natsstore.Open(ctx, natsstore.Options{URL: url, Node: fmt.Sprint("node-", i), Logger: slog.New(slog.DiscardHandler)})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Close() })
		es[i] = newEngine(t, ns, engine.Options{NodeID: fmt.Sprint("node-", i), AcceptAgent: none})
	}
	mustThread(t, es[0], "t1")
	_, err := es[1].CreateRun(ctxT(t), "t1", engine.RunRequest{Agent: "mine", Input: userInput("hi")})
	wantCode(t, err, tether.CodeBadRequest)
	if _, _, err := es[0].DeclareAgent(ctxT(t), "mine"); err != nil {
		t.Fatal(err)
	}
	mustRun(t, es[1], "t1", engine.RunRequest{Agent: "mine", Input: userInput("hi")})
	list, err := es[1].Agents(ctxT(t))
	if err != nil || len(list) != 1 || list[0].Name != "mine" || list[0].Declared != "api" {
		t.Fatalf("agents on the other node: %+v, %v", list, err)
	}
}

// The agent names workers asked for are remembered for ten minutes, not
// for the life of the process: a worker that names a new agent in each
// claim (a run ID, a version) must not grow the server without bound.
func TestClaimedAgentNamesAreForgotten(t *testing.T) {
	clock := testutil.NewClock()
	e := newEngine(t, testutil.OpenStore(t, ""), engine.Options{AcceptAgent: none, Now: clock.Now})
	ctx := ctxT(t)
	for i := range 100 {
		names := make([]string, 100)
		for j := range names {
			names[j] = fmt.Sprintf("agent-%d-%d", i, j)
		}
		if _, err := e.Claim(ctx, engine.ClaimRequest{WorkerID: "w", Agents: names}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute)
	}
	// Names claimed in the last ten minutes, and those of the quarter of
	// it before, as they are pruned: at most 14 claims of 100.
	if n := engine.SeenAgents(e); n > 1400 {
		t.Fatalf("the engine remembers %d agent names, want those of the last ten minutes only", n)
	}
	mustThread(t, e, "t1")
	if _, err := e.CreateRun(ctx, "t1", engine.RunRequest{Agent: "agent-99-7"}); err != nil {
		t.Fatalf("a name claimed a minute ago: %v", err)
	}
	_, err := e.CreateRun(ctx, "t1", engine.RunRequest{Agent: "agent-0-7", Multitask: tether.MultitaskEnqueue})
	wantCode(t, err, tether.CodeBadRequest)
}
