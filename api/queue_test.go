package api_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents"
	"github.com/tetherhq/tether/agents/demo"
	"github.com/tetherhq/tether/agents/runner"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
)

// Past the runner's concurrency, runs stay pending and GET /v1/runs/{rid}
// says where each is in line; when a running run ends, the first in line
// starts and the others move up.
func TestRunQueuePosition(t *testing.T) {
	e := engine.New(testutil.OpenStore(t, ""), engine.Options{
		AcceptAgent: func(n string) bool { return n == "demo" }, InProcess: []string{"demo"},
	})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	rn := runner.New(e, map[string]agents.Agent{"demo": demo.New()}, runner.Options{Concurrency: 2})
	rn.Start()
	srv := api.New(e, api.Options{})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		// The runs left wait a minute: abort them at once.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		rn.Shutdown(ctx)
		srv.Shutdown()
		hs.Close()
		e.Close()
	})
	v := &env{t: t, url: hs.URL, e: e, srv: srv, hs: hs}

	type runView struct {
		Run   tether.Run `json:"run"`
		Queue *struct {
			Position int `json:"position"`
		} `json:"queue"`
	}
	get := func(id string) runView {
		var rv runView
		v.mustDo(200, "GET", "/v1/runs/"+id, nil).json(&rv)
		return rv
	}
	// Runs that wait (the demo agent pausing a minute before each event)
	// until cancelled.
	var ids []string
	for i := range 5 {
		tid := fmt.Sprintf("q%d", i)
		v.mustDo(201, "POST", "/v1/threads", map[string]any{"id": tid})
		var run tether.Run
		v.mustDo(201, "POST", "/v1/threads/"+tid+"/runs", map[string]any{
			"agent": "demo", "metadata": map[string]any{"demo": map[string]any{"delay_ms": 60000}},
		}).json(&run)
		ids = append(ids, run.ID)
		if i < 2 {
			// The first two start, in order: the runner has room for two.
			waitUntil(t, "run "+run.ID+" running", func() bool { return get(run.ID).Run.Status == tether.RunRunning })
		}
	}
	check := func(pending []string) {
		t.Helper()
		for i, id := range pending {
			rv := get(id)
			if rv.Run.Status != tether.RunPending || rv.Queue == nil || rv.Queue.Position != i+1 {
				t.Errorf("run %s: status %s, queue %+v; want pending at position %d", id, rv.Run.Status, rv.Queue, i+1)
			}
		}
	}
	check(ids[2:])
	if rv := get(ids[0]); rv.Queue != nil {
		t.Errorf("a running run has a queue position: %+v", rv.Queue)
	}

	v.mustDo(202, "POST", "/v1/runs/"+ids[0]+"/cancel", nil)
	waitUntil(t, "the first in line to start", func() bool { return get(ids[2]).Run.Status == tether.RunRunning })
	check(ids[3:])
	if st := get(ids[1]).Run.Status; st != tether.RunRunning {
		t.Errorf("run 2 is %s", st)
	}
}

// waitUntil polls cond until it holds, failing the test after a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A deleted thread's pending run leaves the line: the run behind it is
// next (position 1), and tether_runs_queued no longer counts it.
func TestRunQueueAfterDelete(t *testing.T) {
	v := newEnvEngine(t, api.Options{}, engine.Options{})
	var ids []string
	for i := range 3 {
		tid := fmt.Sprintf("q%d", i)
		v.mustDo(201, "POST", "/v1/threads", map[string]any{"id": tid})
		var run tether.Run
		v.mustDo(201, "POST", "/v1/threads/"+tid+"/runs", `{"agent":"ext"}`).json(&run)
		ids = append(ids, run.ID)
	}
	v.mustDo(204, "DELETE", "/v1/threads/q0", nil)
	for i, id := range ids[1:] {
		var rv struct {
			Queue *struct{ Position int }
		}
		v.mustDo(200, "GET", "/v1/runs/"+id, nil).json(&rv)
		if rv.Queue == nil || rv.Queue.Position != i+1 {
			t.Errorf("run %s: queue %+v, want position %d", id, rv.Queue, i+1)
		}
	}
	if m := string(v.mustDo(200, "GET", "/metrics", nil).body); !strings.Contains(m, "tether_runs_queued 2\n") {
		t.Errorf("tether_runs_queued is not 2 after the delete")
	}
}
