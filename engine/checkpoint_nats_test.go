package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store/natsstore"
	"github.com/tetherhq/tether/store/natsstore/natstest"
)

// On JetStream too, a node that restarts loads a thread from its
// checkpoint (none of it ignored) and the log after it, to the same state.
func TestCheckpointLoadNATS(t *testing.T) {
	url := natstest.StartServer(t).ClientURL()
	openNS := func() *natsstore.Store {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ns, err := natsstore.Open(ctx, natsstore.Options{URL: url, Node: "n1", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Close() })
		return ns
	}
	st := openNS()
	e1 := newEngine(t, st, engine.Options{NodeID: "n1", CheckpointEvents: 100})
	mustThread(t, e1, "t1")
	for k := range 20 {
		mustRun(t, e1, "t1", engine.RunRequest{Input: userInput("q")})
		c := mustClaim(t, e1, "echo")
		words := strings.Fields(strings.Repeat("lorem ipsum dolor ", 10))
		mustAppend(t, e1, c, append(answer(fmt.Sprintf("m%d", k), words...), finished(tether.RunDone))...)
	}
	testutil.Eventually(t, 10*time.Second, "a checkpoint", func() bool { return e1.Counters().Checkpoints.Load() > 0 })
	want := snapJSON(t, e1, "t1")
	e1.Close()
	st.Close()

	cs := &countingStore{Store: openNS()}
	var logs testutil.SyncBuffer
	e2 := newEngine(t, cs, engine.Options{NodeID: "n1", CheckpointEvents: 100, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if got := snapJSON(t, e2, "t1"); got != want {
		t.Fatalf("loaded from the checkpoint:\n%s\nwant\n%s", got, want)
	}
	if !cs.ckpt.Load() || strings.Contains(logs.String(), "checkpoint ignored") {
		t.Fatalf("the load did not use the checkpoint: %s", logs.String())
	}
}
