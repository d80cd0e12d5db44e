package agents

import (
	"context"
	"encoding/json"
	"sync"
)

// Answers holds the answers to a run's requests (run.input) that its
// transport's follower has seen, by request id: the follower puts each
// as it comes, and a transport's WaitInput waits in Wait. An answer may
// come before the agent waits for it (a fast client), so it is kept, not
// handed over. The zero value is ready to use.
type Answers struct {
	mu   sync.Mutex
	byID map[string]json.RawMessage
	wake chan struct{} // closed and replaced when an answer comes
}

// Put keeps the answer to requestID and wakes its waiters.
func (a *Answers) Put(requestID string, v json.RawMessage) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byID == nil {
		a.byID = make(map[string]json.RawMessage)
	}
	a.byID[requestID] = v
	if a.wake != nil {
		close(a.wake)
		a.wake = nil
	}
}

// Wait returns the answer to requestID once it has come, or ctx's cause.
func (a *Answers) Wait(ctx context.Context, requestID string) (json.RawMessage, error) {
	for {
		a.mu.Lock()
		v, ok := a.byID[requestID]
		if a.wake == nil {
			a.wake = make(chan struct{})
		}
		wake := a.wake
		a.mu.Unlock()
		if ok {
			return v, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}
