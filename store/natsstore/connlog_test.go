package natsstore_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store/natsstore/natstest"
)

// A store's connection events (a lost server, the reconnect) are in its
// log, where an operator reads them.
func TestConnectionEventsLogged(t *testing.T) {
	srv := natstest.StartServer(t)
	var buf testutil.SyncBuffer
	opts := optionsFor(srv.ClientURL(), t.TempDir(), 1)
	opts.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	st := openStore(t, opts)
	defer st.Close()
	natstest.Stop(srv)
	natstest.Restart(t, srv)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(buf.String(), "reconnected to NATS") {
		if time.Now().After(deadline) {
			t.Fatalf("no reconnect in the log:\n%s", buf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(buf.String(), "disconnected from NATS") {
		t.Fatalf("no disconnect in the log:\n%s", buf.String())
	}
}

// TestCloseWithServerGone: a node whose server died closes anyway, within
// about its Timeout: nothing in Close waits for an answer that cannot come
// (the repair consumer's drain is confirmed by the server).
func TestCloseWithServerGone(t *testing.T) {
	srv := natstest.StartServer(t)
	opts := optionsFor(srv.ClientURL(), t.TempDir(), 1)
	opts.Timeout = time.Second
	st := openStore(t, opts)
	natstest.Stop(srv)
	closed := make(chan error, 1)
	go func() { closed <- st.Close() }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close still waiting 30 s after it started, with a Timeout of 1 s")
	}
}
