package api_test

import (
	"testing"

	"github.com/tetherhq/tether/api"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// feedStore is a store whose feed of the shared log the test cuts and
// restores, as natsstore reports a node cut off from NATS.
type feedStore struct {
	store.Store
	notify func(store.FeedState)
}

func (f *feedStore) SetFeedNotify(fn func(store.FeedState)) { f.notify = fn }

// A node that cannot follow the shared log answers /readyz 503, so that a
// load balancer sends its clients to a node that can, and 200 again once
// it follows it. Before, /readyz stayed 200 while every stream of the node
// was refused.
func TestReadyzWhileNotFollowingTheLog(t *testing.T) {
	st := &feedStore{Store: testutil.OpenStore(t, "")}
	v := newEnvStore(t, st, api.Options{}, engine.Options{})
	v.mustDo(200, "GET", "/readyz", nil)
	st.notify(store.FeedState{})
	if body := string(v.mustDo(503, "GET", "/readyz", nil).body); body != `{"status":"not_following_log"}`+"\n" {
		t.Fatalf("readyz while cut off: %q", body)
	}
	st.notify(store.FeedState{Following: true})
	v.mustDo(200, "GET", "/readyz", nil)
}
