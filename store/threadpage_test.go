package store

import "testing"

func TestThreadCursor(t *testing.T) {
	for _, c := range []struct {
		ms int64
		id string
	}{{0, "a"}, {1764620000123, "user42/chat-1"}, {-1, "x:y"}} {
		ms, id, ok := DecodeThreadCursor(EncodeThreadCursor(c.ms, c.id))
		if !ok || ms != c.ms || id != c.id {
			t.Errorf("round trip of (%d, %q): (%d, %q, %v)", c.ms, c.id, ms, id, ok)
		}
	}
	for _, bad := range []string{"", "not base64!", EncodeThreadCursor(5, "")} {
		if _, _, ok := DecodeThreadCursor(bad); ok {
			t.Errorf("cursor %q accepted", bad)
		}
	}
}

func TestPageLimit(t *testing.T) {
	for in, want := range map[int]int{-1: DefaultThreadsLimit, 0: DefaultThreadsLimit, 1: 1, 1000: 1000, 5000: MaxThreadsLimit} {
		if got := (ThreadQuery{Limit: in}).PageLimit(); got != want {
			t.Errorf("Limit %d: page of %d, want %d", in, got, want)
		}
	}
}
