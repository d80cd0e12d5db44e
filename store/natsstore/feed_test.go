package natsstore_test

import (
	"testing"
	"time"

	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/natsstore/natstest"
)

// feedCut stops the store's server until the store reports that it no
// longer follows the log, then starts it again and returns what the
// store reports once it follows the log again.
func feedCut(t *testing.T, tombstoneTTL time.Duration) store.FeedState {
	t.Helper()
	srv := natstest.StartServer(t)
	opts := optionsFor(srv.ClientURL(), t.TempDir(), 1)
	opts.Timeout = time.Second
	opts.TombstoneTTL = tombstoneTTL
	st := openStore(t, opts)
	defer st.Close()
	calls := make(chan store.FeedState, 8)
	st.SetFeedNotify(func(f store.FeedState) { calls <- f })
	next := func(what string) store.FeedState {
		t.Helper()
		select {
		case f := <-calls:
			return f
		case <-time.After(30 * time.Second):
			t.Fatalf("no report of the feed %s within 30s", what)
			return store.FeedState{}
		}
	}
	natstest.Stop(srv)
	if f := next("lost"); f.Following {
		t.Fatalf("the feed was reported %+v, want lost", f)
	}
	srv = natstest.Restart(t, srv)
	f := next("back")
	if !f.Following {
		t.Fatalf("the feed was reported %+v, want followed", f)
	}
	return f
}

// TestFeedLostAndBack: a store whose server goes away tells its feed
// function that it no longer follows the log (after its Timeout), and
// that it does again when the server is back. A cut-off of a few seconds
// leaves what the node holds in memory as good as it was: the deletions
// it missed are still in the log (for a day).
func TestFeedLostAndBack(t *testing.T) {
	if f := feedCut(t, 0); f.Forget {
		t.Fatalf("back after a short cut-off: %+v, want Forget false", f)
	}
}

// TestFeedBackAfterTombstonesMayHaveExpired: a store cut off from the log
// for half its TombstoneTTL or longer (here at least its Timeout, 1s, of
// a TTL of 2s) reports, once it follows the log again, that the node may
// have missed deletions (Forget): their tombstones may have expired.
func TestFeedBackAfterTombstonesMayHaveExpired(t *testing.T) {
	if f := feedCut(t, 2*time.Second); !f.Forget {
		t.Fatalf("back after a cut-off as long as the tombstones last: %+v, want Forget", f)
	}
}
