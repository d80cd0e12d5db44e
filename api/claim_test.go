package api_test

import (
	"context"
	"testing"
	"testing/synctest"
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
// worker received (it would end aborted worker_lost, never worked on). It
// runs in a synctest bubble, so that the commit is held for exactly as long
// as the test says, whatever the machine's load.
func TestClaimAnsweredWhenItsCommitOutlastsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &slowStartStore{Store: testutil.OpenStore(t, ""), held: make(chan struct{}, 1), release: make(chan struct{})}
		h := newBubbleServer(t, st, api.Options{}, engine.Options{LeaseTTL: time.Hour})
		serveOnce(h, "POST", "/v1/threads", `{"id":"t1"}`)
		var run tether.Run
		if r := serveOnce(h, "POST", "/v1/threads/t1/runs", `{"agent":"ext"}`); r.status != 201 {
			t.Fatalf("create run: %d %s", r.status, r.body)
		} else {
			r.json(&run)
		}

		got := make(chan *resp, 1)
		go func() {
			got <- serveOnce(h, "POST", "/v1/workers/claim", `{"worker_id":"w1","agents":["ext"],"wait_ms":0}`)
		}()
		<-st.held
		// Longer than the wait and its second of slack (shorter than the
		// 30s a claim's commit is bounded by): on the bubble's clock, every
		// timer of the claim up to then fires.
		time.Sleep(10 * time.Second)
		synctest.Wait()
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
		if r := serveOnce(h, "POST", "/v1/runs/"+run.ID+"/events", `[{"type":"run.finished","status":"done"}]`, "Tether-Lease", c.Lease.Token); r.status != 200 {
			t.Fatalf("finish: %d %s", r.status, r.body)
		}
	})
}

// A claim's wait_ms above what the server waits is capped at the
// server's maximum (protocol.md §6): the claim waits, and holds one of its
// key's streams meanwhile. A wait_ms whose nanoseconds overflow (a worker
// asking for "as long as allowed" with the largest integer) must not turn
// into no wait.
func TestClaimHugeWaitIsCapped(t *testing.T) {
	const admin, worker = "admin-token-0123456789", "worker-token-0123456789"
	v := newEnvEngine(t, api.Options{
		Keys:    []api.Key{{Token: admin, Role: api.RoleAdmin}, {Token: worker, Role: api.RoleWorker}},
		MaxWait: time.Hour,
		Limits:  api.Limits{Streams: 1},
	}, engine.Options{})
	auth := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	got := make(chan *resp, 1)
	go func() {
		for {
			// Refused while the probe below holds the stream for its
			// millisecond.
			r := v.do("POST", "/v1/workers/claim", `{"worker_id":"w","agents":["ext"],"wait_ms":9223372036854775807}`, auth(worker)...)
			if r.status != 429 {
				got <- r
				return
			}
		}
	}()
	// The waiting claim holds the key's one stream: a claim that would
	// wait too is refused, until the first has returned.
	for {
		select {
		case r := <-got:
			t.Fatalf("the claim returned at once (%d %s), want it to wait", r.status, r.body)
		default:
		}
		if r := v.do("POST", "/v1/workers/claim", `{"worker_id":"w2","agents":["none"],"wait_ms":1}`, auth(worker)...); r.status == 429 {
			break
		}
	}
	v.mustDo(201, "POST", "/v1/threads", `{"id":"t1"}`, auth(admin)...)
	var run tether.Run
	v.mustDo(201, "POST", "/v1/threads/t1/runs", `{"agent":"ext"}`, auth(admin)...).json(&run)
	r := <-got
	if r.status != 200 {
		t.Fatalf("claim: %d %s, want 200 with run %s", r.status, r.body, run.ID)
	}
}
