package natsstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/store"
	"github.com/tetherhq/tether/store/natsstore"
	"github.com/tetherhq/tether/store/natsstore/natstest"
)

var ctx = context.Background()

// eachDeployment runs a test on one server and on a three-server cluster
// (stream and bucket replicated three times).
func eachDeployment(t *testing.T, fn func(t *testing.T, opts natsstore.Options)) {
	t.Run("single", func(t *testing.T) {
		fn(t, optionsFor(natstest.StartServer(t).ClientURL(), t.TempDir(), 1))
	})
	t.Run("cluster", func(t *testing.T) {
		if testing.Short() {
			t.Skip("short")
		}
		fn(t, optionsFor(natstest.URLs(natstest.StartCluster(t, 3)...), t.TempDir(), 3))
	})
}

// node opens one of several stores ("nodes") sharing a stream.
func node(t *testing.T, opts natsstore.Options, name string) *natsstore.Store {
	t.Helper()
	opts.Node = name
	st := openStore(t, opts)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func events(t testing.TB, n int, tag string) ([]*tether.Event, [][]byte) {
	t.Helper()
	evs := make([]*tether.Event, n)
	enc := make([][]byte, n)
	for i := range evs {
		data, _ := json.Marshal(map[string]any{"tag": tag, "i": i})
		evs[i] = &tether.Event{Type: tether.EventCustom, TS: tether.Now(), RunID: "run-1", Data: data}
		var err error
		if enc[i], err = evs[i].Encode(); err != nil {
			t.Fatal(err)
		}
	}
	return evs, enc
}

func createBatch(t testing.TB, id string, n int) *store.Batch {
	evs, enc := events(t, n, id+"-create")
	now := tether.Now()
	return &store.Batch{ThreadID: id, Create: true, Events: evs, Encoded: enc,
		Thread: &tether.Thread{ID: id, Status: tether.ThreadIdle, CreatedAt: now, UpdatedAt: now}}
}

func appendBatch(t testing.TB, id string, version int64, n int, tag string) *store.Batch {
	evs, enc := events(t, n, tag)
	return &store.Batch{ThreadID: id, Version: version, Events: evs, Encoded: enc}
}

func mustCommit(t testing.TB, st store.Store, b *store.Batch) *store.Result {
	t.Helper()
	res, err := st.Commit(ctx, b)
	if err != nil {
		t.Fatalf("commit to %s at %d: %v", b.ThreadID, b.Version, err)
	}
	return res
}

// recorder keeps what a notify function got.
type recorder struct {
	mu  sync.Mutex
	got []string // "thread offset…" per batch
	n   int      // records
}

func (r *recorder) notify(c *store.Committed) {
	s := c.ThreadID + " " + string(c.Before)
	for i, rec := range c.Records {
		if c.Events[i].Offset != rec.Offset {
			s += " MISMATCH"
		}
		s += " " + string(rec.Offset)
	}
	r.mu.Lock()
	r.got = append(r.got, s)
	r.n += len(c.Records)
	r.mu.Unlock()
}

func (r *recorder) records() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// TestTwoNodes has two stores on one stream take turns committing to
// several threads: each sees every batch, its own and the other's, through
// notify, in the same order, and reads what the other committed as soon as
// its Commit returned.
func TestTwoNodes(t *testing.T) {
	eachDeployment(t, func(t *testing.T, opts natsstore.Options) {
		a, b := node(t, opts, "a"), node(t, opts, "b")
		nodes := []*natsstore.Store{a, b}
		recs := []*recorder{{}, {}}
		a.SetNotify(recs[0].notify)
		b.SetNotify(recs[1].notify)

		const threads, rounds = 4, 40
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			total int
		)
		for th := range threads {
			id := fmt.Sprintf("t%d", th)
			wg.Go(func() {
				res, err := nodes[th%2].Commit(ctx, createBatch(t, id, 1))
				if err != nil {
					t.Error(err)
					return
				}
				n := 1
				for i := range rounds {
					writer, reader := nodes[(th+i+1)%2], nodes[(th+i)%2]
					res, err = writer.Commit(ctx, appendBatch(t, id, res.Version, i%3+1, fmt.Sprintf("%s-%d", id, i)))
					if err != nil {
						t.Error(err)
						return
					}
					n += i%3 + 1
					tr, err := reader.Thread(ctx, id)
					if err != nil {
						t.Error(err)
						return
					}
					if tr.Version != res.Version || tr.Thread.LastOffset != res.Records[len(res.Records)-1].Offset {
						t.Errorf("%s: the other node reads version %d last %s, want %d %s", id,
							tr.Version, tr.Thread.LastOffset, res.Version, res.Records[len(res.Records)-1].Offset)
						return
					}
				}
				mu.Lock()
				total += n
				mu.Unlock()
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		// Each node has been notified of its own batches before their
		// Commit returned; the other's may still be on their way.
		deadline := time.Now().Add(20 * time.Second)
		for recs[0].records() < total || recs[1].records() < total {
			if time.Now().After(deadline) {
				t.Fatalf("notified of %d and %d records, want %d each", recs[0].records(), recs[1].records(), total)
			}
			time.Sleep(10 * time.Millisecond)
		}
		a.SetNotify(nil)
		b.SetNotify(nil)
		recs[0].mu.Lock()
		recs[1].mu.Lock()
		defer recs[0].mu.Unlock()
		defer recs[1].mu.Unlock()
		if !slices.Equal(recs[0].got, recs[1].got) {
			t.Fatalf("the nodes were notified differently:\n%v\n%v", recs[0].got, recs[1].got)
		}
		for _, g := range recs[0].got {
			if len(g) > 0 && slices.Contains([]byte(g), 'M') {
				t.Fatalf("notified event and record offsets differ: %s", g)
			}
		}
	})
}

// TestOneWinnerPerVersion has two nodes commit to one thread at the same
// version, again and again: exactly one of each pair commits, the other
// gets ErrConflict, and both read the same log.
func TestOneWinnerPerVersion(t *testing.T) {
	eachDeployment(t, func(t *testing.T, opts natsstore.Options) {
		a, b := node(t, opts, "a"), node(t, opts, "b")
		res := mustCommit(t, a, createBatch(t, "t", 0))
		version, wins := res.Version, [2]int{}
		var log []*tether.Record
		for round := range 60 {
			var (
				wg   sync.WaitGroup
				ress [2]*store.Result
				errs [2]error
			)
			for i, st := range []*natsstore.Store{a, b} {
				wg.Go(func() {
					ress[i], errs[i] = st.Commit(ctx, appendBatch(t, "t", version, 1+i, fmt.Sprintf("r%d-%d", round, i)))
				})
			}
			wg.Wait()
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil && winner >= 0:
					t.Fatalf("round %d: both nodes committed at version %d", round, version)
				case err == nil:
					winner = i
				case !errors.Is(err, store.ErrConflict):
					t.Fatalf("round %d: node %d: %v", round, i, err)
				}
			}
			if winner < 0 {
				t.Fatalf("round %d: neither node committed", round)
			}
			wins[winner]++
			version = ress[winner].Version
			log = append(log, ress[winner].Records...)
		}
		t.Logf("wins: %v", wins)
		for i, st := range []*natsstore.Store{a, b} {
			got := readAll(t, st, "t")
			if len(got) != len(log) {
				t.Fatalf("node %d reads %d events, want %d", i, len(got), len(log))
			}
			for j := range got {
				if got[j].Offset != log[j].Offset || string(got[j].Data) != string(log[j].Data) {
					t.Fatalf("node %d: event %d differs", i, j)
				}
			}
			if tr, err := st.Thread(ctx, "t"); err != nil || tr.Version != version {
				t.Fatalf("node %d: thread %+v, %v; want version %d", i, tr, err, version)
			}
		}
	})
}

func readAll(t testing.TB, st store.Store, id string) []*tether.Record {
	t.Helper()
	var all []*tether.Record
	after := tether.OffsetStart
	for {
		recs, err := st.ReadEvents(ctx, id, after, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			return all
		}
		all = append(all, recs...)
		after = recs[len(recs)-1].Offset
	}
}

func newRun(id, thread, key string, status tether.RunStatus) *store.RunRecord {
	now := tether.Now()
	return &store.RunRecord{
		Run:            tether.Run{ID: id, ThreadID: thread, Agent: "demo", Status: status, CreatedAt: now, LastUpdateAt: now},
		IdempotencyKey: key,
		Multitask:      tether.MultitaskEnqueue,
		Lease:          store.Lease{Token: "tok-" + id, Owner: "w", ExpiresAt: time.Now().Add(time.Minute)},
	}
}

// eventually retries check until it returns nil, for up to 20s.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRepair has a node die right after publishing its batches, before it
// wrote their rows to the bucket, and after publishing a deletion, before
// it cleaned up. Another node reads the thread exactly at once (it folds
// the log after the bucket's row), and its repairer writes the missing
// rows, which the listing and the active runs come from.
func TestRepair(t *testing.T) {
	eachDeployment(t, func(t *testing.T, opts natsstore.Options) {
		opts.RepairDelay = 50 * time.Millisecond
		b := node(t, opts, "b")
		opts.NoRepair = true // b does the repairs
		a := node(t, opts, "a")
		mustCommit(t, a, createBatch(t, "old", 1))

		natsstore.DieAfterPublish(a, true)
		c := createBatch(t, "t", 2)
		c.Runs = []*store.RunRecord{newRun("r1", "t", "k1", tether.RunPending)}
		mustCommit(t, a, c)
		u := appendBatch(t, "t", 2, 3, "more")
		r1 := newRun("r1", "t", "k1", tether.RunRunning)
		u.Runs = []*store.RunRecord{r1}
		u.Producers = []store.Producer{{Key: "p", Epoch: 1, Seq: 7}}
		now := tether.Now()
		u.Thread = &tether.Thread{ID: "t", Status: tether.ThreadBusy, CreatedAt: now, UpdatedAt: now, ActiveRunID: "r1"}
		last := mustCommit(t, a, u).Records[2].Offset
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}

		// Exact at once: the thread, its log, its key and its producer.
		tr, err := b.Thread(ctx, "t")
		if err != nil || tr.Version != 5 || tr.Thread.LastOffset != last || tr.Thread.Status != tether.ThreadBusy {
			t.Fatalf("thread: %+v, %v", tr, err)
		}
		if n := len(readAll(t, b, "t")); n != 5 {
			t.Fatalf("log of %d events, want 5", n)
		}
		if rr, err := b.RunByKey(ctx, "t", "k1"); err != nil || rr.Run.Status != tether.RunRunning {
			t.Fatalf("run by key: %+v, %v", rr, err)
		}
		if p, err := b.Producer(ctx, "t", "p"); err != nil || p.Seq != 7 {
			t.Fatalf("producer: %+v, %v", p, err)
		}
		if rr, err := b.ThreadRun(ctx, "t", "r1"); err != nil || rr.Run.Status != tether.RunRunning {
			t.Fatalf("run of the thread: %+v, %v", rr, err)
		}
		if _, err := b.ThreadRun(ctx, "old", "r1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("run of another thread: %v", err)
		}

		// Once repaired: the run, the active runs, the listing.
		eventually(t, "repair", func() error {
			rr, err := b.Run(ctx, "r1")
			if err != nil || rr.Run.Status != tether.RunRunning {
				return fmt.Errorf("run r1: %+v, %v", rr, err)
			}
			active, err := b.ActiveRuns(ctx)
			if err != nil || len(active) != 1 || active[0].Run.ID != "r1" {
				return fmt.Errorf("active runs %v, %v", active, err)
			}
			page, err := b.Threads(ctx, store.ThreadQuery{})
			if err != nil || len(page.Threads) != 2 || page.Threads[0].ID != "t" || page.Threads[0].Status != tether.ThreadBusy {
				return fmt.Errorf("listing %+v, %v", page, err)
			}
			return nil
		})
		mustCommit(t, b, appendBatch(t, "t", 5, 1, "b"))

		// A deletion that stopped after its tombstone.
		d := node(t, opts, "d") // no repairer either
		natsstore.DieAfterPublish(d, true)
		if err := d.DeleteThread(ctx, "t"); err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Thread(ctx, "t"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("thread after delete: %v", err)
		}
		if _, err := b.RunByKey(ctx, "t", "k1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("run by key after delete: %v", err)
		}
		if _, err := b.Run(ctx, "r1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("run after delete: %v", err)
		}
		if active, err := b.ActiveRuns(ctx); err != nil || len(active) != 0 {
			t.Fatalf("active runs after delete: %v, %v", active, err)
		}
		js := jsClient(t, opts.URL)
		eventually(t, "cleanup", func() error {
			page, err := b.Threads(ctx, store.ThreadQuery{})
			if err != nil || len(page.Threads) != 1 || page.Threads[0].ID != "old" {
				return fmt.Errorf("listing %+v, %v", page, err)
			}
			st, err := js.Stream(ctx, opts.Stream)
			if err != nil {
				return err
			}
			info, err := st.Info(ctx, jetstream.WithSubjectFilter(natsstore.LogSubject(b, "t")))
			if err != nil {
				return err
			}
			if n := info.State.Subjects[natsstore.LogSubject(b, "t")]; n != 1 {
				return fmt.Errorf("%d messages left in the deleted log, want its tombstone only", n)
			}
			return nil
		})
		// And the thread can be created again.
		res := mustCommit(t, b, createBatch(t, "t", 1))
		if res.Version != 1 || res.Before != tether.OffsetStart {
			t.Fatalf("recreated: %+v", res)
		}
	})
}

// TestScanFallback lists threads and active runs with the ordered consumer
// that reads the bucket when a pattern matches more keys than one request
// returns.
func TestScanFallback(t *testing.T) {
	st := node(t, optionsFor(natstest.StartServer(t).ClientURL(), t.TempDir(), 1), "a")
	for i := range 12 {
		id := fmt.Sprintf("t%02d", i)
		b := createBatch(t, id, i%2)
		b.Runs = []*store.RunRecord{newRun("r"+id, id, "", tether.RunPending)}
		mustCommit(t, st, b)
	}
	want, err := st.Threads(ctx, store.ThreadQuery{Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	wantRuns, err := st.ActiveRuns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer natsstore.ForceConsumerScan()()
	got, err := st.Threads(ctx, store.ThreadQuery{Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) || len(got.Threads) != 5 || got.Next == "" {
		t.Fatalf("listing\n%s\nwant\n%s", g, w)
	}
	runs, err := st.ActiveRuns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 12 || len(runs) != len(wantRuns) {
		t.Fatalf("%d active runs, want 12", len(runs))
	}
	for i := range runs {
		if runs[i].Run.ID != wantRuns[i].Run.ID {
			t.Fatalf("active run %d is %s, want %s", i, runs[i].Run.ID, wantRuns[i].Run.ID)
		}
	}
}

// TestEpoch checks that offsets carry the stream's creation time, or the
// epoch its metadata sets (after a restore).
func TestEpoch(t *testing.T) {
	url := natstest.StartServer(t).ClientURL()
	opts := optionsFor(url, t.TempDir(), 1)
	before := time.Now().Unix()
	st := node(t, opts, "a")
	if e := int64(st.Epoch()); e < before-1 || e > time.Now().Unix() {
		t.Fatalf("epoch %d, want about %d", e, before)
	}
	res := mustCommit(t, st, createBatch(t, "t", 1))
	if e, _, _ := tether.ParseOffset(res.Records[0].Offset); e != st.Epoch() {
		t.Fatalf("offset %s not of epoch %d", res.Records[0].Offset, st.Epoch())
	}
	_ = st.Close()

	js := jsClient(t, url)
	s, err := js.Stream(ctx, opts.Stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.Metadata = map[string]string{natsstore.EpochMetadata: "4000000000"}
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	st = node(t, opts, "a")
	if st.Epoch() != 4000000000 {
		t.Fatalf("epoch %d, want the metadata's", st.Epoch())
	}
	res = mustCommit(t, st, appendBatch(t, "t", 1, 1, "x"))
	if e, _, _ := tether.ParseOffset(res.Records[0].Offset); e != 4000000000 {
		t.Fatalf("offset %s", res.Records[0].Offset)
	}
	// The old cursor names an epoch that is gone.
	if _, err := st.ReadEvents(ctx, "t", res.Before, 10); !errors.Is(err, store.ErrOffsetNotFound) {
		t.Fatalf("read from an offset of the old epoch: %v", err)
	}
}

// TestBatchTooLarge checks that a batch larger than the server takes fails
// whole.
func TestBatchTooLarge(t *testing.T) {
	st := node(t, optionsFor(natstest.StartServer(t).ClientURL(), t.TempDir(), 1), "a")
	mustCommit(t, st, createBatch(t, "t", 1))
	b := appendBatch(t, "t", 1, 1, "big")
	big, _ := json.Marshal(map[string]string{"x": string(make([]byte, 2<<20))})
	b.Events[0].Data = big
	b.Encoded[0], _ = b.Events[0].Encode()
	if _, err := st.Commit(ctx, b); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("a batch larger than max_payload: %v, want ErrTooLarge", err)
	}
	if tr, err := st.Thread(ctx, "t"); err != nil || tr.Version != 1 {
		t.Fatalf("thread %+v, %v", tr, err)
	}
	mustCommit(t, st, appendBatch(t, "t", 1, 1, "small"))
}

// bigAppend returns an append of one event whose encoding is about n bytes.
func bigAppend(t *testing.T, id string, version int64, n int) *store.Batch {
	b := appendBatch(t, id, version, 1, "big")
	b.Events[0].Data, _ = json.Marshal(map[string]string{"x": strings.Repeat("x", n)})
	b.Encoded[0], _ = b.Events[0].Encode()
	return b
}

// TestBatchTooLargeForTheStream checks that a batch within the server's
// max_payload but above the max_msg_size of a stream made with other
// settings fails whole with ErrTooLarge (the engine's 413), not with an
// error the engine answers 503 to, which a client retries for ever.
func TestBatchTooLargeForTheStream(t *testing.T) {
	opts := optionsFor(natstest.StartServer(t).ClientURL(), t.TempDir(), 1)
	js := jsClient(t, opts.URL)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: opts.Stream, Subjects: []string{opts.Subject + ".*"},
		MaxMsgSize: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	st := node(t, opts, "a")
	mustCommit(t, st, createBatch(t, "t", 1))
	if _, err := st.Commit(ctx, bigAppend(t, "t", 1, 100<<10)); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("a batch larger than the stream's max_msg_size: %v, want ErrTooLarge", err)
	}
	if tr, err := st.Thread(ctx, "t"); err != nil || tr.Version != 1 {
		t.Fatalf("thread %+v, %v", tr, err)
	}
	mustCommit(t, st, appendBatch(t, "t", 1, 1, "small"))
}

// TestBatchTooLargeAfterReconnect checks that the size limit is the one of
// the server the store is connected to now: after its server came back
// with a smaller max_payload, a batch between the two limits fails at once
// with ErrTooLarge. It was checked against the limit seen at Open, and the
// client's refusal taken for an unknown outcome: published again for three
// times the timeout, then "outcome unknown" (the engine's 503).
func TestBatchTooLargeAfterReconnect(t *testing.T) {
	o := server.Options{ServerName: "s", Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true}
	run := func(o server.Options) *server.Server {
		s, err := server.NewServer(&o)
		if err != nil {
			t.Fatal(err)
		}
		go s.Start()
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatal("nats-server did not start")
		}
		t.Cleanup(func() { natstest.Stop(s) })
		return s
	}
	srv := run(o)
	opts := optionsFor(srv.ClientURL(), t.TempDir(), 1)
	opts.Timeout = 2 * time.Second
	st := node(t, opts, "a")
	defer st.Close() // before the servers stop
	mustCommit(t, st, createBatch(t, "t", 1))

	o.Port = srv.Addr().(*net.TCPAddr).Port
	natstest.Stop(srv)
	o.MaxPayload = 64 << 10
	run(o)
	for i := 0; ; i++ {
		if _, err := st.Thread(ctx, "t"); err == nil {
			break
		} else if i == 100 {
			t.Fatalf("no thread after the server came back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := st.Commit(ctx, bigAppend(t, "t", 1, 100<<10)); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("a batch larger than the new server's max_payload: %v, want ErrTooLarge", err)
	}
	if tr, err := st.Thread(ctx, "t"); err != nil || tr.Version != 1 {
		t.Fatalf("thread %+v, %v", tr, err)
	}
	mustCommit(t, st, appendBatch(t, "t", 1, 1, "small"))
}

// TestBucketMadeWithOtherSettings checks that a store works on a bucket
// that exists without the settings Open gives one it creates, as one made
// with the nats CLI's "kv add" does: rows' tombstones need per-message
// TTLs. Without them every tombstone failed: the row of a thread stayed
// behind its log from its first ended run on (the repairer failing for
// ever), and a deleted thread's log was never purged nor its rows deleted.
func TestBucketMadeWithOtherSettings(t *testing.T) {
	opts := optionsFor(natstest.StartServer(t).ClientURL(), t.TempDir(), 1)
	js := jsClient(t, opts.URL)
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: opts.Stream + "_META"}); err != nil {
		t.Fatal(err)
	}
	// The log's stream as stores made it before deletions' tombstones
	// expired: without per-message TTLs.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: opts.Stream, Subjects: []string{opts.Subject + ".*"},
		Storage: jetstream.FileStorage, AllowDirect: true, DenyDelete: true}); err != nil {
		t.Fatal(err)
	}
	a := node(t, opts, "a")
	c := createBatch(t, "t", 1)
	c.Runs = []*store.RunRecord{newRun("r1", "t", "k1", tether.RunPending)}
	mustCommit(t, a, c)
	u := appendBatch(t, "t", 1, 1, "end")
	r1 := newRun("r1", "t", "k1", tether.RunDone)
	u.Runs = []*store.RunRecord{r1}
	mustCommit(t, a, u)
	if active, err := a.ActiveRuns(ctx); err != nil || len(active) != 0 {
		t.Fatalf("active runs after the run ended: %v, %v", active, err)
	}
	if err := a.DeleteThread(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, opts.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(natsstore.LogSubject(a, "t")))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[natsstore.LogSubject(a, "t")]; n != 1 {
		t.Fatalf("%d messages left in the deleted log, want its tombstone only", n)
	}
	kv, err := js.KeyValue(ctx, opts.Stream+"_META")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		if e, err := kv.Get(ctx, k); err == nil && !strings.HasPrefix(k, "f.") && !strings.Contains(string(e.Value()), `"del":true`) {
			t.Errorf("row %s left after the delete: %s", k, e.Value())
		}
	}
}

// TestRepairAfterItsConsumerIsDeleted checks that a running node's
// repairer goes on when its durable consumer is deleted (by hand, or lost
// with a server's state): it makes the consumer again and repairs the
// batches of a node that died after its publish. Its loop used to end
// when the consumer's iterator closed, so that no running node repaired
// anything until one restarted.
func TestRepairAfterItsConsumerIsDeleted(t *testing.T) {
	opts := optionsFor(natstest.StartServer(t).ClientURL(), t.TempDir(), 1)
	opts.RepairDelay = 50 * time.Millisecond
	b := node(t, opts, "b")
	opts.NoRepair = true // b does the repairs
	a := node(t, opts, "a")
	mustCommit(t, a, createBatch(t, "old", 1))

	js := jsClient(t, opts.URL)
	if err := js.DeleteConsumer(ctx, opts.Stream, "tether_repair"); err != nil {
		t.Fatal(err)
	}

	natsstore.DieAfterPublish(a, true)
	c := createBatch(t, "t", 2)
	c.Runs = []*store.RunRecord{newRun("r1", "t", "k1", tether.RunPending)}
	mustCommit(t, a, c)
	eventually(t, "repair", func() error {
		rr, err := b.Run(ctx, "r1")
		if err != nil || rr.Run.Status != tether.RunPending {
			return fmt.Errorf("run r1: %+v, %v", rr, err)
		}
		return nil
	})
}

// TestStreamWithLimitsRefused checks that Open refuses a log stream or a
// bucket made beforehand with limits under which JetStream drops messages
// by itself (an age, a count or a size of the stream, or a retention other
// than limits): events acknowledged as durable would vanish later. It
// used to bind to them.
func TestStreamWithLimitsRefused(t *testing.T) {
	srv := natstest.StartServer(t)
	js := jsClient(t, srv.ClientURL())
	for _, c := range []struct {
		meta bool
		set  func(*jetstream.StreamConfig)
		want string
	}{
		{false, func(c *jetstream.StreamConfig) { c.MaxAge = time.Hour }, "max_age"},
		{false, func(c *jetstream.StreamConfig) { c.MaxMsgs = 1000 }, "max_msgs"},
		{false, func(c *jetstream.StreamConfig) { c.MaxBytes = 1 << 30 }, "max_bytes"},
		{false, func(c *jetstream.StreamConfig) { c.Retention = jetstream.InterestPolicy }, "retention"},
		{true, func(c *jetstream.StreamConfig) { c.MaxAge = time.Hour }, "max_age"},
	} {
		opts := optionsFor(srv.ClientURL(), t.TempDir(), 1)
		cfg := jetstream.StreamConfig{Name: opts.Stream, Subjects: []string{opts.Subject + ".*"}, MaxMsgsPerSubject: -1}
		if c.meta {
			cfg = jetstream.StreamConfig{Name: "KV_" + opts.Stream + "_META", Subjects: []string{"$KV." + opts.Stream + "_META.>"}, MaxMsgsPerSubject: 1}
		}
		c.set(&cfg)
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		octx, cancel := context.WithTimeout(ctx, 20*time.Second)
		st, err := natsstore.Open(octx, opts)
		cancel()
		if err == nil {
			st.Close()
			t.Fatalf("%s: opened a stream with %s set", cfg.Name, c.want)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: %v, want it to name %s", cfg.Name, err, c.want)
		}
	}
}

// jsClient returns a JetStream client of its own on the server at url, as
// an operator's tool would be, closed at the end of the test.
func jsClient(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
