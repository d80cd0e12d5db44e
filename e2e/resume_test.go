package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherhq/tether/internal/ssetest"
)

// TestResumeUnderCuts: 20 clients follow one demo run of 600 tokens over
// raw SSE; each connection is cut several times at random points (after a
// random number of events, or after a random delay, which may land in the
// middle of a frame), and each client resumes with Last-Event-ID. Every
// client must end with exactly the run's log: same offsets and JSON, no gap,
// no duplicate; and its text deltas joined must be the final answer.
func TestResumeUnderCuts(t *testing.T) {
	s := start(t, "")
	tid, rid := s.demoRun(t, "How do durable streams survive cuts?", `{"demo":{"tokens":600,"delay_ms":3}}`)

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	const clients = 20
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	results := make([]cutClient, clients)
	var wg sync.WaitGroup
	for i := range results {
		c := &results[i]
		c.name = fmt.Sprintf("client %d", i)
		c.rng = rand.New(rand.NewPCG(seed, uint64(i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.err = c.follow(ctx, s, "/v1/runs/"+rid+"/events")
		}()
	}
	wg.Wait()

	run := s.waitRunEnded(t, rid)
	if run.Status != "done" {
		t.Fatalf("run ended %s: %+v", run.Status, run.Error)
	}
	log := s.readLog(t, "/v1/runs/"+rid+"/events")
	if n := len(log); n < 600 || log[n-1].Type != "run.finished" {
		t.Fatalf("the run's log has %d events, the last %+v", n, log[n-1])
	}
	answer := s.finalAnswer(t, tid)
	if !answer.Complete || answer.Content == "" {
		t.Fatalf("final answer %+v", answer)
	}
	cuts := 0
	for i := range results {
		c := &results[i]
		if c.err != nil {
			t.Errorf("%s: %v", c.name, c.err)
			continue
		}
		cuts += int(c.cuts.Load())
		sameSequence(t, c.name, c.events, log)
		var text strings.Builder
		for _, e := range c.events {
			if e.Type == "text.delta" {
				var d struct {
					Delta string `json:"delta"`
				}
				json.Unmarshal(e.Data, &d)
				text.WriteString(d.Delta)
			}
		}
		if text.String() != answer.Content {
			t.Errorf("%s: the text deltas joined are\n  %q\nthe final answer is\n  %q", c.name, text.String(), answer.Content)
		}
	}
	t.Logf("%d events, %d cuts in all", len(log), cuts)
	// A client whose last event is the run.finished gets :ok and connected,
	// and the stream ends: nothing is left to send.
	st, err := s.openStream(ctx, "/v1/runs/"+rid+"/events", log[len(log)-1].Offset)
	if err != nil {
		t.Fatal(err)
	}
	var frames []frame
	for {
		f, err := st.next()
		if err != nil {
			break
		}
		frames = append(frames, f)
	}
	st.close()
	if len(frames) != 3 || !frames[0].IsComment || frames[1].Event != "connected" || frames[2].Event != "end" || frames[2].Data != `{"reason":"run_finished"}` {
		t.Errorf("a stream resumed after the run's end sent %+v, want :ok, connected and end", frames)
	}

	// The server let go of every cut stream.
	eventually(t, 30*time.Second, "the server to close every stream", func() bool {
		return s.metric(t, "tether_sse_streams") == 0 && s.metric(t, "tether_subscriptions") == 0
	})
	if cuts < clients {
		t.Errorf("only %d cuts for %d clients: the test did not exercise resumption", cuts, clients)
	}
}

// cutClient follows a run's events and cuts its own connection at random,
// resuming each time from the last event it got.
type cutClient struct {
	name   string
	rng    *rand.Rand
	events []seenEvent
	cuts   atomic.Int64 // also counted by timers
	err    error
}

func (c *cutClient) follow(ctx context.Context, s *server, path string) error {
	left := 3 + c.rng.IntN(4) // cuts still to make
	last := ""
	for conn := 0; ; conn++ {
		if conn > 200 {
			return errors.New("no run.finished after 200 connections")
		}
		p := path
		if last == "" {
			p += "?after=-1"
		}
		cctx, cancel := context.WithCancel(ctx)
		st, err := s.openStream(cctx, p, last)
		if err != nil {
			cancel()
			return fmt.Errorf("connection %d: %w", conn, err)
		}
		cutAfter := -1 // events
		var timer *time.Timer
		var cut sync.Once
		if left > 0 {
			left--
			if c.rng.IntN(2) == 0 {
				cutAfter = 1 + c.rng.IntN(150)
			} else {
				d := time.Duration(1+c.rng.IntN(100)) * time.Millisecond
				timer = time.AfterFunc(d, func() { cut.Do(func() { c.cuts.Add(1) }); cancel() })
			}
		}
		var finished, cutHere bool
		c.events, finished, cutHere, err = ssetest.ReadResumed(st.Stream, c.events, cutAfter)
		if cutHere {
			cut.Do(func() { c.cuts.Add(1) })
		}
		if timer != nil {
			timer.Stop()
		}
		st.close()
		cancel()
		if err != nil {
			return fmt.Errorf("connection %d: %w", conn, err)
		}
		if finished {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("connection %d: %w (after %d events)", conn, ctx.Err(), len(c.events))
		}
		if n := len(c.events); n > 0 {
			last = c.events[n-1].Offset
		}
	}
}
