package natsstore_test

import (
	"testing"
	"time"

	"github.com/tetherhq/tether/store/natsstore/natstest"
)

// TestFeedLostAndBack: a store whose server goes away tells its feed
// function that it no longer follows the log (after its Timeout), and
// that it does again when the server is back.
func TestFeedLostAndBack(t *testing.T) {
	srv := natstest.StartServer(t)
	opts := optionsFor(srv.ClientURL(), t.TempDir(), 1)
	opts.Timeout = time.Second
	st := openStore(t, opts)
	defer st.Close()
	calls := make(chan bool, 8)
	st.SetFeedNotify(func(following bool) { calls <- following })
	next := func(what string) bool {
		t.Helper()
		select {
		case f := <-calls:
			return f
		case <-time.After(30 * time.Second):
			t.Fatalf("no report of the feed %s within 30s", what)
			return false
		}
	}
	natstest.Stop(srv)
	if next("lost") {
		t.Fatal("the feed was reported followed, want lost")
	}
	srv = natstest.Restart(t, srv)
	if !next("back") {
		t.Fatal("the feed was reported lost again, want followed")
	}
}
