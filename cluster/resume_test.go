package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/internal/ssetest"
)

// TestResumeOnAnyNode: three nodes on one JetStream cluster (R3); a demo
// run created on the first; 20 clients spread over the nodes follow it over
// SSE, each cut several times at random (after some events, or after a
// delay that may land mid-frame) and resumed with Last-Event-ID on a node
// picked at random. Every client ends with exactly the run's log (offsets
// and bytes), which every node serves identically, and every node gives
// the same final answer: the text deltas joined.
func TestResumeOnAnyNode(t *testing.T) {
	js := startJetStream(t)
	nodes := startNodes(t, js, 3, nodeOptions{})
	eps := make([]*endpoint, len(nodes))
	for i, n := range nodes {
		eps[i] = &n.endpoint
	}
	a := eps[0]
	a.createThread(t, "t1")
	run := a.demoRun(t, "t1", "How do durable streams survive cuts?", `{"tokens":400,"delay_ms":4}`)

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	const clients = 20
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cs := make([]*cutClient, clients)
	var wg sync.WaitGroup
	for i := range cs {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		c := &cutClient{name: fmt.Sprintf("client %d", i), rng: rng, nodes: eps, first: i % len(eps), cutsLeft: 3 + rng.IntN(4)}
		cs[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.err = c.follow(ctx, "/v1/runs/"+run.ID+"/events")
		}()
	}
	wg.Wait()

	final := a.waitRun(t, run.ID, 30*time.Second, "ended", func(r tether.Run) bool { return r.Status.Terminal() })
	if final.Status != "done" {
		t.Fatalf("run ended %s: %+v", final.Status, final.Error)
	}
	t.Logf("run executed by %s", final.WorkerID)
	log := a.readLog(t, "/v1/runs/"+run.ID+"/events")
	if n := len(log); n < 400 || log[n-1].Type != "run.finished" {
		t.Fatalf("the run's log has %d events, the last %+v", n, log[n-1])
	}
	answer := a.finalAnswer(t, "t1")
	if !answer.Complete || answer.Content == "" {
		t.Fatalf("final answer %+v", answer)
	}
	for _, p := range eps[1:] {
		// Each node serves the run's end once notified of it.
		p.waitRun(t, run.ID, 10*time.Second, "ended", func(r tether.Run) bool { return r.Status.Terminal() })
		sameLog(t, p.name+"'s log", p.readLog(t, "/v1/runs/"+run.ID+"/events"), log)
		if fa := p.finalAnswer(t, "t1"); fa != answer {
			t.Errorf("%s: final answer %+v, %s gives %+v", p.name, fa, a.name, answer)
		}
	}
	cuts, moves := 0, 0
	for _, c := range cs {
		if c.err != nil {
			t.Errorf("%s: %v", c.name, c.err)
			continue
		}
		cuts += c.cuts
		moves += c.moves
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
	t.Logf("%d events, %d cuts, %d resumes on another node", len(log), cuts, moves)
	if cuts < clients || moves < clients {
		t.Errorf("only %d cuts and %d moves for %d clients: the test did not exercise resumption", cuts, moves, clients)
	}
}

// cutClient follows a run's events from its start, cutting its own
// connection at random and resuming from the last event it got on a node
// picked at random.
type cutClient struct {
	name     string
	rng      *rand.Rand
	nodes    []*endpoint
	first    int  // the node of the first connection
	cutsLeft int  // cuts still to make
	failover bool // a failed connection moves to another node (a node died)

	events []seenEvent
	cuts   int
	moves  int // resumes on a node other than the previous connection's
	fails  int // connections that failed (with failover)
	err    error
}

func (c *cutClient) follow(ctx context.Context, path string) error {
	last, at := "", c.first
	for conn := 0; ; conn++ {
		if conn > 300 {
			return errors.New("no run.finished after 300 connections")
		}
		p := path
		if last == "" {
			p += "?after=-1"
		}
		node := c.nodes[at]
		cctx, cancel := context.WithCancel(ctx)
		st, err := node.openStream(cctx, p, last)
		if err != nil && c.failover && ctx.Err() == nil {
			cancel()
			c.fails++
			time.Sleep(50 * time.Millisecond)
			at = c.rng.IntN(len(c.nodes))
			continue
		}
		if err != nil {
			cancel()
			return fmt.Errorf("connection %d to %s: %w", conn, node.name, err)
		}
		cutAfter := -1
		var timer *time.Timer
		var mu sync.Mutex
		cut := false
		if c.cutsLeft > 0 {
			c.cutsLeft--
			if c.rng.IntN(2) == 0 {
				cutAfter = 1 + c.rng.IntN(120)
			} else {
				d := time.Duration(1+c.rng.IntN(150)) * time.Millisecond
				timer = time.AfterFunc(d, func() { mu.Lock(); cut = true; mu.Unlock(); cancel() })
			}
		}
		var finished, cutHere bool
		c.events, finished, cutHere, err = ssetest.ReadResumed(st.Stream, c.events, cutAfter)
		if err != nil && last != "" {
			err = fmt.Errorf("resumed after %s: %w", last, err)
		}
		if timer != nil {
			timer.Stop()
		}
		st.close()
		cancel()
		if err != nil {
			return fmt.Errorf("connection %d to %s: %w", conn, node.name, err)
		}
		mu.Lock()
		if cut || cutHere {
			c.cuts++
		}
		mu.Unlock()
		if finished {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("connection %d: %w (after %d events)", conn, ctx.Err(), len(c.events))
		}
		if n := len(c.events); n > 0 {
			last = c.events[n-1].Offset
		}
		next := c.rng.IntN(len(c.nodes))
		if next != at {
			c.moves++
		}
		at = next
	}
}
