package natsstore

import (
	"context"
	"encoding/json"
	"errors"
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

// Declared agents: one key per name an operator declared, "d.<name>",
// holding a declaredRow; a removal writes the row with del set (which
// scans and reads skip), so a name can be declared again later.

var _ store.AgentRegistry = (*Store)(nil)

type declaredRow struct {
	rowMeta
	Name string    `json:"name,omitempty"`
	At   time.Time `json:"at,omitzero"`
}

func declaredKey(name string) string { return "d." + token(name) }

// DeclareAgent implements store.AgentRegistry. Of two nodes declaring a
// name at once, the compare-and-set on the key lets one write it; the
// other keeps its time.
func (s *Store) DeclareAgent(ctx context.Context, name string, at time.Time) (bool, error) {
	if s.isClosed() {
		return false, store.ErrClosed
	}
	for attempt := 0; ; attempt++ {
		row, rev, err := s.declared(ctx, name)
		if err != nil {
			return false, err
		}
		if row != nil {
			return false, nil
		}
		val, err := json.Marshal(declaredRow{Name: name, At: at.UTC()})
		if err != nil {
			return false, err
		}
		if _, err := s.kvPut(ctx, declaredKey(name), val, rev, 0); err != nil {
			if errors.Is(err, errCAS) && attempt < 20 {
				continue // another node wrote it meanwhile: read it again
			}
			return false, s.readErr("declare agent", err)
		}
		return true, nil
	}
}

// RemoveAgent implements store.AgentRegistry.
func (s *Store) RemoveAgent(ctx context.Context, name string) error {
	if s.isClosed() {
		return store.ErrClosed
	}
	row, rev, err := s.declared(ctx, name)
	if err != nil {
		return err
	}
	if row == nil {
		return store.ErrNotFound
	}
	val, err := json.Marshal(declaredRow{rowMeta: rowMeta{Del: true}})
	if err != nil {
		return err
	}
	if _, err := s.kvPut(ctx, declaredKey(name), val, rev, 0); err != nil {
		if errors.Is(err, errCAS) {
			return store.ErrNotFound // removed (or declared again) by another node meanwhile
		}
		return s.readErr("remove agent", err)
	}
	return nil
}

// DeclaredAgent implements store.AgentRegistry.
func (s *Store) DeclaredAgent(ctx context.Context, name string) (time.Time, error) {
	if s.isClosed() {
		return time.Time{}, store.ErrClosed
	}
	row, _, err := s.declared(ctx, name)
	if err != nil {
		return time.Time{}, err
	}
	if row == nil {
		return time.Time{}, store.ErrNotFound
	}
	return row.At, nil
}

// DeclaredAgents implements store.AgentRegistry.
func (s *Store) DeclaredAgents(ctx context.Context) (map[string]time.Time, error) {
	if s.isClosed() {
		return nil, store.ErrClosed
	}
	rows, err := s.scan(ctx, "d.*")
	if err != nil {
		return nil, s.readErr("read agents", err)
	}
	out := make(map[string]time.Time, len(rows))
	for _, data := range rows {
		var row declaredRow
		if err := json.Unmarshal(data, &row); err != nil {
			return nil, err
		}
		out[row.Name] = row.At
	}
	return out, nil
}

// declared reads a name's row: nil if it is not declared, with the
// revision to expect when writing it.
func (s *Store) declared(ctx context.Context, name string) (*declaredRow, uint64, error) {
	data, rev, err := s.kvGet(ctx, declaredKey(name))
	if err != nil {
		return nil, 0, s.readErr("read agent", err)
	}
	if data == nil {
		return nil, rev, nil
	}
	var row declaredRow
	if err := json.Unmarshal(data, &row); err != nil {
		return nil, 0, err
	}
	if row.Del {
		return nil, rev, nil
	}
	return &row, rev, nil
}
