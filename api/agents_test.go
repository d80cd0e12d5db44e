package api_test

import (
	"strings"
	"testing"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
)

// The admin API declares external agent names; runs of them are accepted
// before any worker claims, and GET /v1/agents lists why each name is.
func TestDeclareAgentsOverHTTP(t *testing.T) {
	v := newEnvEngine(t, api.Options{}, engine.Options{
		AcceptAgent: func(n string) bool { return n == "demo" }, InProcess: []string{"demo"}, Declared: []string{"flagged"},
	})
	v.thread("t1")
	// The refusal says what to do: a user who sent a run before starting
	// the worker was left with "no worker has asked for it".
	if r := v.mustDo(400, "POST", "/v1/threads/t1/runs", map[string]any{"agent": "mine"}); !strings.Contains(string(r.body), "PUT /v1/agents/mine") || !strings.Contains(string(r.body), "--agents mine") {
		t.Errorf("the refusal does not say how to declare the agent: %s", r.body)
	}
	v.mustDo(201, "PUT", "/v1/agents/mine", nil)
	v.mustDo(200, "PUT", "/v1/agents/mine", map[string]any{})
	v.mustDo(400, "PUT", "/v1/agents/mine", map[string]any{"extra": 1})
	v.mustDo(201, "POST", "/v1/threads/t1/runs", map[string]any{"agent": "mine"})

	var list struct {
		Agents []map[string]any `json:"agents"`
	}
	v.mustDo(200, "GET", "/v1/agents", nil).json(&list)
	if len(list.Agents) != 3 {
		t.Fatalf("agents: %v", list.Agents)
	}
	want := []struct {
		name     string
		inProc   bool
		declared any
	}{{"demo", true, nil}, {"flagged", false, "config"}, {"mine", false, "api"}}
	for i, w := range want {
		a := list.Agents[i]
		if a["name"] != w.name || a["in_process"] != w.inProc || a["declared"] != w.declared || (!w.inProc && a["last_claim_at"] != nil) {
			t.Errorf("agent %d: %v, want %+v", i, a, w)
		}
	}
	if list.Agents[2]["declared_at"] == nil {
		t.Errorf("mine has no declared_at: %v", list.Agents[2])
	}
	v.mustDo(409, "DELETE", "/v1/agents/flagged", nil)
	v.mustDo(204, "DELETE", "/v1/agents/mine", nil)
	v.mustDo(404, "DELETE", "/v1/agents/mine", nil)
}
