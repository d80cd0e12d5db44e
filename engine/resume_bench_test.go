package engine_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/engine"
	"github.com/tetherhq/tether/store/sqlitestore"
)

// BenchmarkResume measures picking a thread up on a fresh engine (as after
// a restart: nothing of it in memory; the store's file in the OS cache)
// against the length of its history: a stream resumed 10 events before
// the tail (subscribe, then the 10 events) and a snapshot (a load: the
// checkpoint and the log after it). Histories: 1,000 and 100,000 events,
// or TETHER_BENCH_RESUME_EVENTS (comma-separated).
func BenchmarkResume(b *testing.B) {
	sizes := []int{1000, 100_000}
	if v := os.Getenv("TETHER_BENCH_RESUME_EVENTS"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatal(err)
			}
			sizes = append(sizes, n)
		}
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, n := range sizes {
		path := filepath.Join(b.TempDir(), "tether.db")
		cursor := fillThread(b, path, n)
		st, err := sqlitestore.Open(path, sqlitestore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		for _, kind := range []string{"stream", "snapshot"} {
			b.Run(fmt.Sprintf("events=%d/%s", n, kind), func(b *testing.B) {
				for b.Loop() {
					e := engine.New(st, engine.Options{Logger: quiet, CheckpointEvents: -1})
					if kind == "snapshot" {
						if _, err := e.Thread(ctx, "t"); err != nil {
							b.Fatal(err)
						}
					} else {
						sub, err := e.Subscribe(ctx, engine.SubscribeRequest{ThreadID: "t", Cursor: cursor})
						if err != nil {
							b.Fatal(err)
						}
						for got := 0; got < 10; {
							recs, err := sub.Next(ctx)
							if err != nil {
								b.Fatal(err)
							}
							got += len(recs)
						}
						sub.Close()
					}
					e.Close()
				}
			})
		}
		st.Close()
	}
}

// fillThread writes a thread "t" of about n events to a new store at path
// (runs of a question and 500 text deltas), checkpointed as the engine
// does, and returns the offset 10 events before its tail.
func fillThread(b *testing.B, path string, n int) tether.Offset {
	b.Helper()
	st, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	e := engine.New(st, engine.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if _, _, err := e.CreateThread(ctx, "t", nil); err != nil {
		b.Fatal(err)
	}
	var cursor tether.Offset
	events := 0
	for k := 0; events < n; k++ {
		if _, err := e.CreateRun(ctx, "t", engine.RunRequest{Agent: "bench", Input: userInput(fmt.Sprintf("question %d", k))}); err != nil {
			b.Fatal(err)
		}
		c, err := e.Claim(ctx, engine.ClaimRequest{WorkerID: "w", Agents: []string{"bench"}, Wait: time.Second})
		if err != nil || c == nil {
			b.Fatalf("claim: %v", err)
		}
		msg := fmt.Sprintf("m%d", k)
		evs := []*tether.Event{{Type: tether.EventMessageStarted, MessageID: msg, Role: tether.RoleAssistant}}
		for range 500 {
			evs = append(evs, &tether.Event{Type: tether.EventTextDelta, MessageID: msg, Delta: "lorem ipsum dolor sit amet, con"})
		}
		for i := 0; i < len(evs); i += 100 {
			if _, err := e.Append(ctx, c.Run.ID, c.Lease.Token, evs[i:min(i+100, len(evs))]); err != nil {
				b.Fatal(err)
			}
		}
		res, err := e.Append(ctx, c.Run.ID, c.Lease.Token, []*tether.Event{{Type: tether.EventTextDelta, MessageID: msg, Delta: "."}})
		if err != nil {
			b.Fatal(err)
		}
		cursor = res.NextOffset
		filler := []*tether.Event{}
		for range 8 {
			filler = append(filler, &tether.Event{Type: tether.EventTextDelta, MessageID: msg, Delta: "."})
		}
		filler = append(filler, &tether.Event{Type: tether.EventMessageFinished, MessageID: msg, Status: "done"},
			&tether.Event{Type: tether.EventRunFinished, Status: string(tether.RunDone)})
		if _, err := e.Append(ctx, c.Run.ID, c.Lease.Token, filler); err != nil {
			b.Fatal(err)
		}
		events += 3 + len(evs) + 1 + len(filler)
	}
	return cursor
}
