package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
)

// Harness tells the suite how to open the store under test.
type Harness struct {
	// Open opens (creating if needed) a store whose files live in dir. The
	// suite calls it again with the same dir, after closing the first
	// store, to reopen it; it closes every store it opens.
	Open func(t testing.TB, dir string) store.Store
}

// Run runs the conformance suite against the stores h opens, each subtest
// on a store of its own.
func Run(t *testing.T, h Harness) {
	if dir := os.Getenv(childEnv); dir != "" {
		crashChild(t, h, dir)
		return
	}
	tests := []struct {
		name string
		fn   func(*testing.T, *suite)
	}{
		{"CreateThread", testCreateThread},
		{"NotFound", testNotFound},
		{"CommitAndRead", testCommitAndRead},
		{"VersionConflict", testVersionConflict},
		{"AtomicBatch", testAtomicBatch},
		{"ContextDone", testContextDone},
		{"ReadFromEveryOffset", testReadFromEveryOffset},
		{"ReadPaging", testReadPaging},
		{"ReadPage", testReadPage},
		{"OffsetNotFound", testOffsetNotFound},
		{"Notify", testNotify},
		{"ConcurrentAppends", testConcurrentAppends},
		{"Pipelining", testPipelining},
		{"FailedBatchFailsPipelined", testFailedBatchFailsPipelined},
		{"Runs", testRuns},
		{"Threads", testThreads},
		{"Namespaces", testNamespaces},
		{"Owners", testOwners},
		{"Checkpoint", testCheckpoint},
		{"LoadThread", testLoadThread},
		{"LoadThreadConsistent", testLoadThreadConsistent},
		{"Producers", testProducers},
		{"LeaseChecks", testLeaseChecks},
		{"DeleteThread", testDeleteThread},
		{"AgentRegistry", testAgentRegistry},
		{"Reopen", testReopen},
		{"Close", testClose},
		{"CloseFinishesBatches", testCloseFinishesBatches},
		{"CrashRecovery", testCrashRecovery},
	}
	s := &suite{h: h, runName: t.Name()}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, s) })
	}
}

// suite holds what the tests share.
type suite struct {
	h       Harness
	runName string // the test that called Run, for the crash test's child
}

// open opens a store in dir and closes it when the test ends.
func (s *suite) open(t testing.TB, dir string) store.Store {
	t.Helper()
	st := s.h.Open(t, dir)
	if st == nil {
		t.Fatal("Harness.Open returned nil")
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// fresh opens a store in a new directory.
func (s *suite) fresh(t testing.TB) store.Store {
	t.Helper()
	return s.open(t, t.TempDir())
}

var ctx = context.Background()

// payload is the Data of the events the suite appends: tag names the batch
// and i the event in it, so any event read back says where it came from.
type payload struct {
	Tag string `json:"tag"`
	I   int    `json:"i"`
}

// newEvents returns n events of run runID and their encodings.
func newEvents(tb testing.TB, n int, runID, tag string) ([]*tether.Event, [][]byte) {
	tb.Helper()
	evs := make([]*tether.Event, n)
	enc := make([][]byte, n)
	for i := range evs {
		data, _ := json.Marshal(payload{Tag: tag, I: i})
		evs[i] = &tether.Event{Type: tether.EventCustom, TS: tether.Now(), RunID: runID,
			MessageID: fmt.Sprintf("msg-%d", i%3), Name: "storetest", Data: data}
		if i%4 == 1 {
			evs[i].Type = tether.EventTextDelta
			evs[i].Delta = "héllo \"world\"\n"
			evs[i].Name = ""
		}
		var err error
		if enc[i], err = evs[i].Encode(); err != nil {
			tb.Fatal(err)
		}
	}
	return evs, enc
}

// appendBatch is a batch of n events on an existing thread.
func appendBatch(tb testing.TB, threadID string, version int64, n int, tag string) *store.Batch {
	tb.Helper()
	evs, enc := newEvents(tb, n, "run-"+threadID, tag)
	return &store.Batch{ThreadID: threadID, Version: version, Events: evs, Encoded: enc}
}

// createBatch creates a thread with n events.
func createBatch(tb testing.TB, threadID string, n int) *store.Batch {
	tb.Helper()
	b := appendBatch(tb, threadID, 0, n, threadID+"-create")
	b.Create = true
	now := tether.Now()
	b.Thread = &tether.Thread{ID: threadID, Status: tether.ThreadIdle, Metadata: json.RawMessage(`{"k":"v"}`),
		CreatedAt: now, UpdatedAt: now}
	return b
}

func commit(tb testing.TB, st store.Store, b *store.Batch) *store.Result {
	tb.Helper()
	res, err := st.Commit(ctx, b)
	if err != nil {
		tb.Fatalf("commit to %s (version %d, %d events): %v", b.ThreadID, b.Version, len(b.Events), err)
	}
	checkResult(tb, b, res)
	return res
}

// checkResult checks what Commit returned against the batch.
func checkResult(tb testing.TB, b *store.Batch, res *store.Result) {
	tb.Helper()
	if res == nil {
		tb.Fatal("Commit returned a nil result")
	}
	if len(res.Records) != len(b.Events) {
		tb.Fatalf("Commit returned %d records for %d events", len(res.Records), len(b.Events))
	}
	prev := res.Before
	if prev != tether.OffsetStart {
		if _, _, err := tether.ParseOffset(prev); err != nil {
			tb.Fatalf("Result.Before %q is neither OffsetStart nor an event offset", prev)
		}
	}
	for i, rec := range res.Records {
		ev := b.Events[i]
		if _, _, err := tether.ParseOffset(rec.Offset); err != nil {
			tb.Fatalf("record %d: %v", i, err)
		}
		if ev.Offset != rec.Offset {
			tb.Fatalf("event %d: Offset %q, record has %q", i, ev.Offset, rec.Offset)
		}
		if !rec.Offset.After(prev) {
			tb.Fatalf("record %d: offset %q does not follow %q", i, rec.Offset, prev)
		}
		prev = rec.Offset
		if rec.Type != ev.Type || rec.RunID != ev.RunID || rec.MessageID != ev.MessageID {
			tb.Fatalf("record %d: (type, run, message) = (%q, %q, %q), want (%q, %q, %q)",
				i, rec.Type, rec.RunID, rec.MessageID, ev.Type, ev.RunID, ev.MessageID)
		}
		if want := tether.WithOffset(b.Encoded[i], rec.Offset); !bytes.Equal(rec.Data, want) {
			tb.Fatalf("record %d: data\n%s\nwant\n%s", i, rec.Data, want)
		}
		if !json.Valid(rec.Data) {
			tb.Fatalf("record %d: invalid JSON %s", i, rec.Data)
		}
	}
	if b.Thread != nil && len(b.Events) > 0 && b.Thread.LastOffset != prev {
		tb.Fatalf("Batch.Thread.LastOffset = %q, want %q", b.Thread.LastOffset, prev)
	}
}

// sameRecords fails unless got and want hold the same events.
func sameRecords(tb testing.TB, what string, got, want []*tether.Record) {
	tb.Helper()
	if len(got) != len(want) {
		tb.Fatalf("%s: %d records, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Offset != w.Offset || g.Type != w.Type || g.RunID != w.RunID || g.MessageID != w.MessageID ||
			!bytes.Equal(g.Data, w.Data) {
			tb.Fatalf("%s: record %d is\n%+v\nwant\n%+v", what, i, recString(g), recString(w))
		}
	}
}

func recString(r *tether.Record) string {
	return fmt.Sprintf("{offset %s type %s run %s message %s data %s}", r.Offset, r.Type, r.RunID, r.MessageID, r.Data)
}

// readAll reads a thread's whole log.
func readAll(tb testing.TB, st store.Store, threadID string) []*tether.Record {
	tb.Helper()
	var all []*tether.Record
	after := tether.OffsetStart
	for {
		recs, err := st.ReadEvents(ctx, threadID, after, 500)
		if err != nil {
			tb.Fatalf("read %s after %s: %v", threadID, after, err)
		}
		if len(recs) == 0 {
			return all
		}
		all = append(all, recs...)
		after = recs[len(recs)-1].Offset
	}
}

func payloadOf(tb testing.TB, r *tether.Record) payload {
	tb.Helper()
	ev, err := r.Decode()
	if err != nil {
		tb.Fatalf("decode %s: %v", r.Data, err)
	}
	if ev.Offset != r.Offset {
		tb.Fatalf("record %s carries offset %q in its JSON", r.Offset, ev.Offset)
	}
	var p payload
	if err := json.Unmarshal(ev.Data, &p); err != nil {
		tb.Fatalf("decode payload %s: %v", ev.Data, err)
	}
	return p
}

// tagOf is the tag of a record's payload, or "" if it has none. Unlike
// payloadOf it does not fail the test, so notify functions may call it.
func tagOf(r *tether.Record) string {
	ev, err := r.Decode()
	if err != nil {
		return ""
	}
	var p payload
	_ = json.Unmarshal(ev.Data, &p)
	return p.Tag
}

func threadOf(tb testing.TB, st store.Store, id string) *store.ThreadRecord {
	tb.Helper()
	tr, err := st.Thread(ctx, id)
	if err != nil {
		tb.Fatalf("Thread(%s): %v", id, err)
	}
	return tr
}

func wantErr(tb testing.TB, what string, err, want error) {
	tb.Helper()
	if !errors.Is(err, want) {
		tb.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

// sameThread compares thread rows field by field (metadata as JSON).
func sameThread(tb testing.TB, what string, got, want tether.Thread) {
	tb.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	// UpdatedAt may trail by up to a second (see Batch.Thread).
	lag := want.UpdatedAt.Sub(got.UpdatedAt.Time)
	got.UpdatedAt, want.UpdatedAt = tether.Time{}, tether.Time{}
	g, _ = json.Marshal(got)
	w, _ = json.Marshal(want)
	if !bytes.Equal(g, w) || !got.CreatedAt.Equal(want.CreatedAt.Time) || lag < 0 || lag >= time.Second {
		tb.Fatalf("%s: thread\n%s\nwant\n%s (updated_at %v behind)", what, g, w, lag)
	}
}

// maxOffset is the greatest offset of recs (OffsetStart if none).
func maxOffset(recs ...[]*tether.Record) tether.Offset {
	m := tether.OffsetStart
	for _, rs := range recs {
		for _, r := range rs {
			if r.Offset.After(m) {
				m = r.Offset
			}
		}
	}
	return m
}

// deadline bounds waits that only a broken store makes long.
const deadline = 60 * time.Second
