package engine_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/internal/testutil"
	"github.com/tetherhq/tether/store"
)

// countingStore counts the log records a load reads, and whether it got a
// checkpoint.
type countingStore struct {
	store.Store
	records atomic.Int64
	ckpt    atomic.Bool
}

func (c *countingStore) LoadThread(ctx context.Context, id string, limit int) (*store.ThreadLoad, error) {
	ld, err := c.Store.LoadThread(ctx, id, limit)
	if err == nil {
		c.records.Add(int64(len(ld.Records)))
		c.ckpt.Store(ld.Checkpoint != nil)
	}
	return ld, err
}

func (c *countingStore) ReadEvents(ctx context.Context, id string, after tether.Offset, limit int) ([]*tether.Record, error) {
	recs, err := c.Store.ReadEvents(ctx, id, after, limit)
	c.records.Add(int64(len(recs)))
	return recs, err
}

func (c *countingStore) ReadPage(ctx context.Context, id string, after tether.Offset, limit, maxBytes int) ([]*tether.Record, bool, error) {
	recs, more, err := c.Store.ReadPage(ctx, id, after, limit, maxBytes)
	c.records.Add(int64(len(recs)))
	return recs, more, err
}

// grow appends runs of answers to a thread until its log holds at least n
// events; the last run stays active, with a message running.
func grow(t *testing.T, e *engine.Engine, id string, n int) *engine.Claim {
	t.Helper()
	var c *engine.Claim
	for k := 0; ; k++ {
		mustRun(t, e, id, engine.RunRequest{Input: userInput(fmt.Sprintf("question %d", k))})
		c = mustClaim(t, e, "echo")
		msg := fmt.Sprintf("m%d", k)
		evs := answer(msg, strings.Fields(strings.Repeat("lorem ipsum dolor ", 10))...)
		snap, err := e.Thread(ctxT(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if countEvents(t, snap)+len(evs)+4 >= n {
			mustAppend(t, e, c, evs[:len(evs)-1]...) // the message stays running
			return c
		}
		mustAppend(t, e, c, append(evs, finished(tether.RunDone))...)
	}
}

func countEvents(t *testing.T, snap *tether.Snapshot) int {
	_, seq, err := tether.ParseOffset(snap.Offset)
	if err != nil {
		return 0
	}
	return int(seq % 1_000_000)
}

func snapJSON(t *testing.T, e *engine.Engine, id string) string {
	t.Helper()
	snap, err := e.Thread(ctxT(t), id)
	if err != nil {
		t.Fatalf("thread %s: %v", id, err)
	}
	b, _ := json.Marshal(snap)
	return string(b)
}

// A thread that grew is checkpointed; a cold load (a new engine, as after
// a restart) starts from the checkpoint and reads only the log after it,
// to the same state, and the thread takes appends at once (its count of
// events is exact: a wrong one would fail every commit's precondition).
func TestCheckpointLoad(t *testing.T) {
	st := testutil.OpenStore(t, "")
	e1 := newEngine(t, st, engine.Options{CheckpointEvents: 100})
	mustThread(t, e1, "t1")
	c := grow(t, e1, "t1", 1000)
	total := len(readAll(t, st, "t1"))
	testutil.Eventually(t, 10*time.Second, "a checkpoint", func() bool { return e1.Counters().Checkpoints.Load() > 0 })
	// A few events after it, too few for another checkpoint.
	msg := lastMsg(t, e1, "t1")
	for range 5 {
		mustAppend(t, e1, c, &tether.Event{Type: tether.EventTextDelta, MessageID: msg, Delta: " tail"})
	}
	total += 5
	want := snapJSON(t, e1, "t1")
	e1.Close()

	cs := &countingStore{Store: st}
	e2 := newEngine(t, cs, engine.Options{CheckpointEvents: 100})
	if got := snapJSON(t, e2, "t1"); got != want {
		t.Fatalf("loaded from the checkpoint:\n%s\nwant\n%s", got, want)
	}
	if !cs.ckpt.Load() {
		t.Fatal("the load got no checkpoint")
	}
	if n := cs.records.Load(); n < 5 || n >= int64(total)/2 {
		t.Errorf("the load read %d of the log's %d events", n, total)
	}
	t.Logf("the load read %d of the log's %d events", cs.records.Load(), total)
	mustAppend(t, e2, c, &tether.Event{Type: tether.EventTextDelta, MessageID: lastMsg(t, e2, "t1"), Delta: " more"},
		finished(tether.RunDone))
	mustRun(t, e2, "t1", engine.RunRequest{Input: userInput("after")})
	if got, want := len(readAll(t, st, "t1")), total+4; got != want {
		t.Fatalf("%d events, want %d", got, want)
	}
}

func lastMsg(t *testing.T, e *engine.Engine, id string) string {
	t.Helper()
	snap, err := e.Thread(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return snap.Messages[len(snap.Messages)-1].ID
}

// A checkpoint that is not what it should be is never trusted over the
// log: the load folds the log from its start, says so in the log, and the
// state is the log's.
func TestCheckpointIgnored(t *testing.T) {
	base := testutil.OpenStore(t, "")
	e1 := newEngine(t, base, engine.Options{CheckpointEvents: -1})
	mustThread(t, e1, "t1")
	mustThread(t, e1, "other")
	c := grow(t, e1, "t1", 300)
	grow(t, e1, "other", 50)
	want := snapJSON(t, e1, "t1")
	e1.Close()

	// A good checkpoint to spoil: saved by an engine that checkpoints
	// every event, of t1 at its tail and of the other thread.
	e2 := newEngine(t, base, engine.Options{CheckpointEvents: 1})
	snapJSON(t, e2, "t1")
	snapJSON(t, e2, "other")
	testutil.Eventually(t, 10*time.Second, "two checkpoints", func() bool { return e2.Counters().Checkpoints.Load() >= 2 })
	e2.Close()
	goodOff, good, err := base.Checkpoint(ctxT(t), "t1")
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := base.Checkpoint(ctxT(t), "other")
	if err != nil {
		t.Fatal(err)
	}
	log := readAll(t, base, "t1")

	flip := bytes.Clone(good)
	flip[len(flip)-3] ^= 0x55
	// The envelope with a count of events one too many, and one too few
	// (which only the log's count can tell).
	n, k := binary.Uvarint(good[1:])
	recount := func(n uint64) []byte {
		return append(binary.AppendUvarint([]byte{good[0]}, n), good[1+k:]...)
	}
	for name, ck := range map[string]struct {
		off  tether.Offset
		data []byte
	}{
		"garbage":          {goodOff, []byte("not a checkpoint")},
		"empty":            {goodOff, nil},
		"unknown version":  {goodOff, append([]byte{99}, good[1:]...)},
		"flipped bit":      {goodOff, flip},
		"count too high":   {goodOff, recount(n + 1)},
		"count too low":    {goodOff, recount(n - 1)},
		"another thread's": {goodOff, other},
		"another offset":   {log[10].Offset, good},
	} {
		t.Run(name, func(t *testing.T) {
			if err := base.SaveCheckpoint(ctxT(t), "t1", ck.off, ck.data); err != nil {
				t.Fatal(err)
			}
			var logs testutil.SyncBuffer
			e := newEngine(t, base, engine.Options{CheckpointEvents: -1,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if got := snapJSON(t, e, "t1"); got != want {
				t.Fatalf("loaded:\n%s\nwant\n%s", got, want)
			}
			if !strings.Contains(logs.String(), "checkpoint ignored") {
				t.Errorf("nothing logged about the checkpoint: %s", logs.String())
			}
			// The count of events is exact: appends commit.
			res, err := e.Heartbeat(ctxT(t), c.Run.ID, engine.Holder{Token: c.Lease.Token})
			if err != nil {
				t.Fatal(err)
			}
			_ = res
			if _, err := e.CreateRun(ctxT(t), "t1", engine.RunRequest{Agent: "echo", Multitask: tether.MultitaskEnqueue, Input: userInput(name)}); err != nil {
				t.Fatalf("append after the load: %v", err)
			}
			want = snapJSON(t, e, "t1")
			e.Close()
		})
	}
}
