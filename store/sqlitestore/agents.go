package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/tetherhq/tether/store"
)

var _ store.AgentRegistry = (*Store)(nil)

// DeclareAgent implements store.AgentRegistry. The write goes through the
// writer, like every other.
func (s *Store) DeclareAgent(ctx context.Context, name string, at time.Time) (bool, error) {
	if s.closed.Load() {
		return false, store.ErrClosed
	}
	var created bool
	err := s.do(&request{ctx: ctx, weight: 1,
		check: func(*Store, *request) error { return nil },
		write: func(s *Store, _ *request) error {
			res, err := s.wconn.ExecContext(context.Background(),
				`INSERT INTO agents (name, declared_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, name, at.UnixMilli())
			if err != nil {
				return fmt.Errorf("declare agent: %w", err)
			}
			n, _ := res.RowsAffected()
			created = n == 1
			return nil
		}})
	return created, err
}

// RemoveAgent implements store.AgentRegistry.
func (s *Store) RemoveAgent(ctx context.Context, name string) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return s.do(&request{ctx: ctx, weight: 1,
		check: func(s *Store, _ *request) error {
			var one int
			err := s.wconn.QueryRowContext(context.Background(), `SELECT 1 FROM agents WHERE name = ?`, name).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return store.ErrNotFound
			}
			return err
		},
		write: func(s *Store, _ *request) error {
			if _, err := s.wconn.ExecContext(context.Background(), `DELETE FROM agents WHERE name = ?`, name); err != nil {
				return fmt.Errorf("remove agent: %w", err)
			}
			return nil
		}})
}

// DeclaredAgent implements store.AgentRegistry.
func (s *Store) DeclaredAgent(ctx context.Context, name string) (time.Time, error) {
	if s.closed.Load() {
		return time.Time{}, store.ErrClosed
	}
	var ms int64
	err := s.rdb.QueryRowContext(ctx, `SELECT declared_at FROM agents WHERE name = ?`, name).Scan(&ms)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, store.ErrNotFound
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("read agent: %w", err)
	}
	return time.UnixMilli(ms).UTC(), nil
}

// DeclaredAgents implements store.AgentRegistry.
func (s *Store) DeclaredAgents(ctx context.Context) (map[string]time.Time, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT name, declared_at FROM agents`)
	if err != nil {
		return nil, fmt.Errorf("read agents: %w", err)
	}
	defer rows.Close()
	out := make(map[string]time.Time)
	for rows.Next() {
		var name string
		var ms int64
		if err := rows.Scan(&name, &ms); err != nil {
			return nil, fmt.Errorf("read agents: %w", err)
		}
		out[name] = time.UnixMilli(ms).UTC()
	}
	return out, rows.Err()
}
