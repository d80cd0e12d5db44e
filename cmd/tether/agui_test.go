package main

import (
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"

	tether "github.com/tetherhq/tether"
)

func TestAGUIAgentsFlag(t *testing.T) {
	parse := func(env string, args ...string) []string {
		t.Helper()
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		l := &agentList{items: splitList(env)}
		fs.Var(l, "ag-ui-agent", "")
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return l.items
	}
	if got := strings.Join(parse("a=http://x/1, b=http://x/2"), " "); got != "a=http://x/1 b=http://x/2" {
		t.Fatalf("from the environment: %q", got)
	}
	if got := strings.Join(parse("a=http://x/1", "--ag-ui-agent", "c=http://x/3", "--ag-ui-agent", "d=http://x/4,e=http://x/5"), " "); got != "c=http://x/3 d=http://x/4 e=http://x/5" {
		t.Fatalf("flags replace the environment: %q", got)
	}

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	got, err := aguiAgents([]string{"research=http://127.0.0.1:9000/agent", "graph=https://agents.example/lg"}, log, "demo")
	if err != nil || len(got) != 2 || got["research"] == nil || got["graph"] == nil {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range [][]string{
		{"research"}, {"=http://x"}, {"research="}, {"re search=http://x"}, {"demo=http://x"},
		{"a=http://x", "a=http://y"}, {"a=ftp://x"}, {"a=not a url"},
	} {
		if _, err := aguiAgents(bad, log, "demo"); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

// tether tail shows what a state event sets.
func TestTailStateEvents(t *testing.T) {
	for _, c := range []struct {
		ev   tether.Event
		want string
	}{
		{tether.Event{Type: tether.EventStateSnapshot, State: json.RawMessage(`{"steps":["plan"]}`)}, `{"steps":["plan"]}`},
		{tether.Event{Type: tether.EventStateDelta, Patch: json.RawMessage(`[{"op":"add","path":"/n","value":1}]`)}, `[{"op":"add","path":"/n","value":1}]`},
	} {
		if got := summary(&c.ev); got != c.want {
			t.Errorf("%s: %q, want %q", c.ev.Type, got, c.want)
		}
	}
}
