package engine

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/clip"
	"github.com/tetherhq/tether/store"
)

// AgentInfo is an agent name runs are accepted for, and why.
type AgentInfo struct {
	Name string `json:"name"`
	// InProcess: this node runs the agent itself.
	InProcess bool `json:"in_process"`
	// Declared says who declared the name: "config" (tether serve
	// --agents), "api" (PUT /v1/agents/{name}), or "" if nobody did.
	Declared string `json:"declared,omitempty"`
	// DeclaredAt is when it was declared through the API.
	DeclaredAt tether.Time `json:"declared_at"`
	// LastClaimAt is when a worker last asked this node for runs of it
	// (it is accepted for ten minutes after).
	LastClaimAt tether.Time `json:"last_claim_at"`
}

// declaredFresh is how long this node trusts a declaration it read from
// the store: a removal through another node takes effect here within it.
const declaredFresh = time.Minute

// maxAgentName bounds agent names, as claims do.
const maxAgentName = 255

// plainAgentName matches a name that a message may show unquoted in a
// command line or a path.
var plainAgentName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func checkAgentName(name string) error {
	if name == "" || len(name) > maxAgentName {
		return tether.Errorf(tether.CodeBadRequest, "agent names must be 1 to %d bytes", maxAgentName)
	}
	return nil
}

// isDeclared reports whether a name is declared by the configuration or
// in the store. A declaration read from the store is trusted for
// declaredFresh; a name not declared is looked up every time, so that a
// declaration through another node holds here at once.
func (e *Engine) isDeclared(ctx context.Context, name string) bool {
	if slices.Contains(e.opts.Declared, name) {
		return true
	}
	reg, ok := e.st.(store.AgentRegistry)
	if !ok {
		return false
	}
	now := e.opts.Now()
	e.agentsMu.Lock()
	at, ok := e.declared[name]
	e.agentsMu.Unlock()
	if ok && now.Sub(at) < declaredFresh {
		return true
	}
	if _, err := reg.DeclaredAgent(ctx, name); err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			e.log.Warn("read the declared agents", "agent", clip.ID(name), "err", err)
		}
		e.agentsMu.Lock()
		delete(e.declared, name)
		e.agentsMu.Unlock()
		return false
	}
	e.agentsMu.Lock()
	e.declared[name] = now
	e.agentsMu.Unlock()
	return true
}

// DeclareAgent declares an external agent name, so that runs of it are
// accepted before any worker asked for it, after restarts too, and on
// every node sharing the store. It reports whether the name was new. It
// returns a bad_request error for a name that is empty or over 255 bytes,
// and unavailable if the store cannot keep it.
func (e *Engine) DeclareAgent(ctx context.Context, name string) (AgentInfo, bool, error) {
	if err := checkAgentName(name); err != nil {
		return AgentInfo{}, false, err
	}
	reg, ok := e.st.(store.AgentRegistry)
	if !ok {
		return AgentInfo{}, false, tether.Errorf(tether.CodeBadRequest, "this store keeps no declared agents: use tether serve --agents")
	}
	now := e.opts.Now()
	created, err := reg.DeclareAgent(ctx, name, now)
	if err != nil {
		return AgentInfo{}, false, e.storeErr(err, "agent %q", name)
	}
	e.agentsMu.Lock()
	e.declared[name] = now
	e.agentsMu.Unlock()
	infos, err := e.Agents(ctx)
	if err != nil {
		return AgentInfo{}, false, err
	}
	for _, a := range infos {
		if a.Name == name {
			return a, created, nil
		}
	}
	return AgentInfo{Name: name, Declared: "api", DeclaredAt: tether.At(now)}, created, nil
}

// RemoveAgent removes a declaration made with DeclareAgent. It returns a
// not_found error if the name is not declared that way, and conflict if
// the server's configuration declares it. Workers that ask for the name
// keep making it known for ten minutes after each claim, as before.
func (e *Engine) RemoveAgent(ctx context.Context, name string) error {
	if err := checkAgentName(name); err != nil {
		return err
	}
	if slices.Contains(e.opts.Declared, name) {
		return tether.Errorf(tether.CodeConflict, "agent %q is declared by the server's configuration (--agents)", name)
	}
	reg, ok := e.st.(store.AgentRegistry)
	if !ok {
		return tether.Errorf(tether.CodeNotFound, "agent %q is not declared", name)
	}
	err := reg.RemoveAgent(ctx, name)
	e.agentsMu.Lock()
	delete(e.declared, name)
	e.agentsMu.Unlock()
	if errors.Is(err, store.ErrNotFound) {
		return tether.Errorf(tether.CodeNotFound, "agent %q is not declared", name)
	}
	if err != nil {
		return e.storeErr(err, "agent %q", name)
	}
	return nil
}

// Agents lists the agent names runs are accepted for: in-process,
// declared (by the configuration or the API) and asked for by a worker of
// this node in the last ten minutes, sorted by name.
func (e *Engine) Agents(ctx context.Context) ([]AgentInfo, error) {
	by := map[string]*AgentInfo{}
	get := func(name string) *AgentInfo {
		a := by[name]
		if a == nil {
			a = &AgentInfo{Name: name}
			by[name] = a
		}
		return a
	}
	for _, n := range e.opts.InProcess {
		get(n).InProcess = true
	}
	if reg, ok := e.st.(store.AgentRegistry); ok {
		declared, err := reg.DeclaredAgents(ctx)
		if err != nil {
			return nil, e.storeErr(err, "the declared agents")
		}
		for n, at := range declared {
			a := get(n)
			a.Declared, a.DeclaredAt = "api", tether.At(at)
		}
	}
	for _, n := range e.opts.Declared {
		get(n).Declared = "config"
	}
	now := e.opts.Now()
	e.agentsMu.Lock()
	for n, at := range e.seen {
		if now.Sub(at) < seenWindow {
			get(n).LastClaimAt = tether.At(at)
		}
	}
	e.agentsMu.Unlock()
	out := make([]AgentInfo, 0, len(by))
	for _, a := range by {
		out = append(out, *a)
	}
	slices.SortFunc(out, func(a, b AgentInfo) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out, nil
}
