package api_test

import (
	"context"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// slowStartStore holds the commit of each run.started until released.
type slowStartStore struct {
	store.Store
	held    chan struct{}
	release chan struct{}
}

func (s *slowStartStore) Commit(ctx context.Context, b *store.Batch) (*store.Result, error) {
	for _, ev := range b.Events {
		if ev.Type == tether.EventRunStarted {
			s.held <- struct{}{}
			<-s.release
			break
		}
	}
	return s.Store.Commit(ctx, b)
}

// A claim whose run.started takes longer to commit than the claim's wait
// is still answered with the run: the wait ending must not give up a claim
// that is being committed, or the run is left started under a lease no
// worker received (it would end aborted worker_lost, never worked on).
func TestClaimAnsweredWhenItsCommitOutlastsTheWait(t *testing.T) {
	st := &slowStartStore{Store: testutil.OpenStore(t, ""), held: make(chan struct{}, 1), release: make(chan struct{})}
	v := newEnvStore(t, st, api.Options{}, engine.Options{LeaseTTL: time.Hour})
	v.thread("t1")
	var run tether.Run
	v.mustDo(201, "POST", "/v1/threads/t1/runs", `{"agent":"ext"}`).json(&run)

	got := make(chan *resp, 1)
	go func() {
		got <- v.do("POST", "/v1/workers/claim", `{"worker_id":"w1","agents":["ext"],"wait_ms":0}`)
	}()
	<-st.held
	// Longer than the wait and its second of slack.
	time.Sleep(1500 * time.Millisecond)
	close(st.release)
	r := <-got
	if r.status != 200 {
		t.Fatalf("claim answered %d %s, want 200 with the run", r.status, r.body)
	}
	var c struct {
		Run   tether.Run
		Lease struct{ Token string }
	}
	r.json(&c)
	if c.Run.ID != run.ID || c.Lease.Token == "" {
		t.Fatalf("claim: %s", r.body)
	}
	v.mustDo(200, "POST", "/v1/runs/"+run.ID+"/events", `[{"type":"run.finished","status":"done"}]`, "Tether-Lease", c.Lease.Token)
}
