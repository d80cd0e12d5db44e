package engine_test

import (
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store/sqlitestore"
)

// TestRecoverSkipsUnloadableThread: a thread whose log cannot be loaded (a
// damaged row) does not keep the server from starting. Recovery logs it at
// error level, counts it, and recovers the other threads; requests for it
// get internal, without the details.
func TestRecoverSkipsUnloadableThread(t *testing.T) {
	dir := t.TempDir()
	opts := engine.Options{AcceptAgent: func(n string) bool { return n == "echo" }}
	st := testutil.OpenStore(t, dir)
	e := engine.New(st, opts)
	if err := e.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	runs := map[string]string{}
	for _, id := range []string{"bad", "good"} {
		mustThread(t, e, id)
		runs[id] = mustRun(t, e, id, engine.RunRequest{Input: userInput("hi")}).ID
	}
	e.Close()
	st.Close()

	db, err := sql.Open("sqlite", filepath.Join(dir, "tether.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE events SET data = x'00ff' WHERE thread = (SELECT pk FROM threads WHERE id = 'bad')`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	st, err = sqlitestore.Open(filepath.Join(dir, "tether.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var logs testutil.SyncBuffer
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	e = engine.New(st, opts)
	t.Cleanup(func() { e.Close() })
	if err := e.Start(ctxT(t)); err != nil {
		t.Fatalf("start with one damaged thread: %v", err)
	}
	if n := e.Counters().RecoveryErrors.Load(); n != 1 {
		t.Errorf("recovery errors: %d, want 1", n)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "thread=bad") {
		t.Errorf("log does not name the thread at error level:\n%s", logs.String())
	}
	// The good thread's pending run was queued for its agent.
	c, err := e.Claim(ctxT(t), engine.ClaimRequest{WorkerID: "w1", Agents: []string{"echo"}, Wait: 5 * time.Second})
	if err != nil || c == nil || c.Run.ID != runs["good"] {
		t.Fatalf("claim: %v, %v; want the run of good", c, err)
	}
	// What a client reads of an error is its code and message (or, for
	// an error that is not a tether.Error, "internal error").
	_, err = e.Thread(ctxT(t), "bad")
	var te *tether.Error
	if tether.CodeOf(err) != tether.CodeInternal || errors.As(err, &te) && strings.Contains(te.Message, "decode") {
		t.Fatalf("thread bad: %v, want internal without details", err)
	}
}
