package agents_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/tetherhq/tether/agents"
)

// An answer that comes before the agent waits is kept for it; one that
// comes while it waits wakes it; a wait that is given up returns the
// context's cause.
func TestAnswers(t *testing.T) {
	var a agents.Answers
	a.Put("q1", json.RawMessage(`"early"`))
	if v, err := a.Wait(t.Context(), "q1"); err != nil || string(v) != `"early"` {
		t.Fatalf("q1: %s %v", v, err)
	}
	got := make(chan string, 1)
	go func() {
		v, err := a.Wait(t.Context(), "q2")
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(v)
	}()
	a.Put("other", json.RawMessage(`1`)) // wakes the waiter, which waits on
	a.Put("q2", json.RawMessage(`"late"`))
	if v := <-got; v != `"late"` {
		t.Fatalf("q2: %s", v)
	}
	stop := errors.New("run ended")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(stop)
	if _, err := a.Wait(ctx, "q3"); !errors.Is(err, stop) {
		t.Fatalf("q3: %v, want the cause", err)
	}
}
