package main

import (
	"fmt"
	"log/slog"
	"strings"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/agents/agui"
)

// agentList is a repeatable flag of NAME=URL items, comma-separated too.
// Its environment twin gives the starting value; the first use of the flag
// replaces it.
type agentList struct {
	items []string
	set   bool
}

func (l *agentList) String() string { return strings.Join(l.items, ",") }

func (l *agentList) Set(s string) error {
	if !l.set {
		l.items, l.set = nil, true
	}
	l.items = append(l.items, splitList(s)...)
	return nil
}

// aguiAgents reads --ag-ui-agent items into agents by name. A name is a
// valid id, once, and not one of the built-in agents'; a URL is http or
// https.
func aguiAgents(items []string, log *slog.Logger, builtin ...string) (map[string]*agui.Agent, error) {
	out := make(map[string]*agui.Agent, len(items))
	for _, item := range items {
		name, url, ok := strings.Cut(item, "=")
		name = strings.TrimSpace(name)
		switch {
		case !ok || name == "" || strings.TrimSpace(url) == "":
			return nil, fmt.Errorf("--ag-ui-agent %q: want NAME=URL", item)
		case !tether.ValidID(name):
			return nil, fmt.Errorf("--ag-ui-agent %q: the name is not a valid id (%s)", item, tether.IDRule)
		case out[name] != nil:
			return nil, fmt.Errorf("--ag-ui-agent: %s is named twice", name)
		}
		for _, b := range builtin {
			if name == b {
				return nil, fmt.Errorf("--ag-ui-agent: %s is a built-in agent's name", name)
			}
		}
		a, err := agui.New(agui.Options{URL: strings.TrimSpace(url), Logger: log})
		if err != nil {
			return nil, fmt.Errorf("--ag-ui-agent %s: %w", name, err)
		}
		out[name] = a
	}
	return out, nil
}
