package natsstore

import (
	"context"
	"encoding/json"
	"time"

	"github.com/tetherhq/tether/store"
)

// The agent directory: one key per agent name a worker asked for, holding
// when it last did. Last writer wins; a node only writes a name again
// after a while, so this costs a write per name and node now and then.

func agentKey(name string) string { return "g." + token(name) }

// SawAgents implements store.AgentDirectory.
func (s *Store) SawAgents(ctx context.Context, names []string, at time.Time) error {
	if s.isClosed() {
		return store.ErrClosed
	}
	val, err := json.Marshal(at.UTC())
	if err != nil {
		return err
	}
	for _, n := range names {
		if _, err := s.publish(ctx, s.kvSubject+agentKey(n), val, -1, "", 0); err != nil {
			return s.readErr("record agent", err)
		}
	}
	return nil
}

// AgentSeenAt implements store.AgentDirectory.
func (s *Store) AgentSeenAt(ctx context.Context, name string) (time.Time, error) {
	if s.isClosed() {
		return time.Time{}, store.ErrClosed
	}
	data, _, err := s.kvGet(ctx, agentKey(name))
	if err != nil {
		return time.Time{}, s.readErr("read agent", err)
	}
	if data == nil {
		return time.Time{}, store.ErrNotFound
	}
	var at time.Time
	if err := json.Unmarshal(data, &at); err != nil {
		return time.Time{}, err
	}
	return at, nil
}
